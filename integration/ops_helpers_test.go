package integration

// Helpers for the operational tests (spoofing_test.go, faults_test.go,
// soak_test.go). They need what the standard harness does not expose: their
// own global options (TLS, per-listener server options, grace period), the
// admin API (config reload, /metrics) and Caddy's process id (RSS).

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// opsEdge is one Caddy process run from a Caddyfile written by the test.
type opsEdge struct {
	t       *testing.T
	pid     int
	admin   string // http://127.0.0.1:<admin port>
	storage string // Caddy's storage root (the internal CA lives here)
	out     *syncBuffer
}

// opsGlobals renders a global options block: the admin API on adminPort,
// nothing persisted or installed outside dir, and extra lines (already
// indented) appended. grace is the shutdown grace period of a config being
// replaced; the reload test needs a real one so that in-flight requests
// finish on the old config instead of being cut.
func opsGlobals(adminPort int, dir string, grace time.Duration, extra string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	skip_install_trust
	grace_period %s
	storage file_system {
		root %s
	}
%s}
`, adminPort, grace, filepath.Join(dir, "storage"), extra)
}

// startOpsEdge writes caddyfile into dir, runs the Caddy binary on it until
// the test ends and returns once ready reports nil (polled; 20s at most).
// Caddy's output is logged, with the Caddyfile, if the test failed.
func startOpsEdge(t *testing.T, dir string, adminPort int, caddyfile string, ready func() error) *opsEdge {
	t.Helper()
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &opsEdge{
		t:       t,
		admin:   "http://127.0.0.1:" + strconv.Itoa(adminPort),
		storage: filepath.Join(dir, "storage"),
		out:     &syncBuffer{},
	}
	cmd := exec.Command(caddyBin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	exited := startProcess(t, cmd, e.out, func() string {
		return fmt.Sprintf("Caddyfile:\n%s\nCaddy output:\n%s", caddyfile, e.out.String())
	})
	e.pid = cmd.Process.Pid
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("caddy exited during startup: %v\n%s", err, e.out.String())
		default:
		}
		err := ready()
		if err == nil {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy not ready within 20s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answersHTTP is a readiness check: url answers HTTP with any status (the
// listeners are bound only after the whole config provisioned).
func answersHTTP(c *http.Client, url string) func() error {
	return func() error {
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
}

// adminClient talks to the admin API without keeping connections, so that
// reading /metrics leaves no idle connection (and its goroutines) behind in
// the figures it reports.
var adminClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// metric reads one unlabelled sample (go_goroutines, …) from the admin
// /metrics endpoint.
func (e *opsEdge) metric(name string) (float64, error) {
	resp, err := adminClient.Get(e.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("metric %s not in /metrics", name)
}

// goroutines is Caddy's go_goroutines.
func (e *opsEdge) goroutines() int {
	e.t.Helper()
	v, err := e.metric("go_goroutines")
	if err != nil {
		e.t.Fatalf("reading go_goroutines: %v", err)
	}
	return int(v)
}

// settleGoroutines polls go_goroutines until it is at most limit or within
// has passed, and returns the last figure. Connection goroutines exit a
// moment after their connection closes, so one sample right after a load
// would overstate what stays.
func (e *opsEdge) settleGoroutines(limit int, within time.Duration) int {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := e.goroutines()
		if n <= limit || time.Now().After(deadline) {
			return n
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rss is Caddy's resident set size, from /proc/<pid>/status (VmRSS).
func (e *opsEdge) rss() int64 {
	e.t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.pid))
	if err != nil {
		e.t.Fatalf("reading Caddy's RSS: %v", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				e.t.Fatalf("parsing VmRSS %q: %v", line, err)
			}
			return kb << 10
		}
	}
	e.t.Fatalf("no VmRSS in /proc/%d/status", e.pid)
	return 0
}

// load replaces Caddy's config through the admin API with a Caddyfile.
func (e *opsEdge) load(caddyfile string) error {
	req, err := http.NewRequest(http.MethodPost, e.admin+"/load", strings.NewReader(caddyfile))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/caddyfile")
	resp, err := adminClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /load: HTTP %d %s", resp.StatusCode, body)
	}
	return nil
}

// localRootPool reads the root certificate of Caddy's internal CA (`tls
// internal`), so the TLS tests verify the edge's certificate for real
// instead of skipping verification.
func localRootPool(storage string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(filepath.Join(storage, "pki", "authorities", "local", "root.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("root.crt holds no certificate")
	}
	return pool, nil
}

// tlsTransport is a client transport to a `tls internal` edge that speaks
// only HTTP/1.1 (h2 false) or prefers HTTP/2 (h2 true, negotiated by ALPN).
func tlsTransport(roots *x509.CertPool, h2 bool) *http.Transport {
	var p http.Protocols
	p.SetHTTP1(!h2)
	p.SetHTTP2(h2)
	return &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		Protocols:       &p,
	}
}

// okUpstream stands in for the MCP service where the test is about the
// edge, not MCP: it reads the request and answers a JSON-RPC result.
var okUpstream = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
})

// auditUpstream counts the requests that reach it and checks each one as
// it arrives, without keeping them, so that it can sit behind a load or
// soak run: no identity header (any spelling), no credential carrier, none
// of secrets in a header or the body, no body carrier left in the JSON.
type auditUpstream struct {
	secrets []string

	served atomic.Int64
	leaks  atomic.Int64

	mu        sync.Mutex
	firstLeak string
}

func (u *auditUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.served.Add(1)
	if why := u.inspect(r.Header, body); why != "" {
		u.leaks.Add(1)
		u.mu.Lock()
		if u.firstLeak == "" {
			u.firstLeak = why
		}
		u.mu.Unlock()
	}
	okUpstream(w, r)
}

func (u *auditUpstream) inspect(h http.Header, body []byte) string {
	if got := identityHeaders(h); len(got) > 0 {
		return fmt.Sprintf("identity headers %v", got)
	}
	for k, vs := range h {
		n := normName(k)
		for _, c := range carrierHeaders {
			if n == c {
				return "carrier header " + k
			}
		}
		for _, v := range vs {
			for i, s := range u.secrets {
				if strings.Contains(v, s) {
					return fmt.Sprintf("header %s holds secret #%d", k, i)
				}
			}
		}
	}
	for i, s := range u.secrets {
		if bytes.Contains(body, []byte(s)) {
			return fmt.Sprintf("body holds secret #%d", i)
		}
	}
	if bytes.Contains(body, []byte(`"delegationToken"`)) {
		return "body still has delegationToken"
	}
	return ""
}

// leak returns the first violation seen ("" if none).
func (u *auditUpstream) leak() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.firstLeak
}

// opsWorld is a world whose credentials name the given audiences (the
// operational tests run edges on several ports, or whose Host is not the
// harness's).
func opsWorld(t *testing.T, audiences ...string) *world {
	t.Helper()
	w := &world{
		issuer: newParty(t, didresolver.Ed25519),
		agent:  newParty(t, didresolver.Ed25519),
		user:   newParty(t, didresolver.Ed25519),
	}
	if len(audiences) > 0 {
		w.audience = audiences[0]
	}
	return w
}

// withAudiences sets every audience of a minted credential.
func withAudiences(auds ...string) func(*vc.Template) {
	return func(tm *vc.Template) { tm.Audience = auds }
}

// hostAudience is the audience the edge derives for requests to
// 127.0.0.1:<port> (did:web with the port's colon %3A-encoded).
func hostAudience(port int) string { return "did:web:127.0.0.1%3A" + strconv.Itoa(port) }

// decodeEdgeError parses an edge rejection body; ok is false if it is not
// the edge's JSON.
func decodeEdgeError(body []byte) (errorBody, bool) {
	var b errorBody
	if err := json.Unmarshal(body, &b); err != nil || b.Error == "" {
		return b, false
	}
	return b, true
}
