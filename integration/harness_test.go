package integration

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// caddyBin is the Caddy binary built once by TestMain from ./cmd/caddy, so
// the tests exercise exactly what users run (Caddyfile adapter, module
// registration, process lifecycle), not an in-process approximation.
var caddyBin string

// demoBin is cmd/mcpi-demo, built by TestMain for TestCaddyfileExample.
var demoBin string

// countInterval is the demo server's pause between progress notifications;
// TestSSEUnbuffered reasons about arrival times in units of it.
const countInterval = 300 * time.Millisecond

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("integration: skipped under -short (builds and runs Caddy)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "caddy-mcpi-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		caddyBin = filepath.Join(dir, "caddy")
		demoBin = filepath.Join(dir, "mcpi-demo")
		// One go build for both: the packages they share are compiled once.
		build := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
			"github.com/mcpi-edge/caddy-mcpi/cmd/caddy", "github.com/mcpi-edge/caddy-mcpi/cmd/mcpi-demo")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "integration: building cmd/caddy and cmd/mcpi-demo: %v\n%s", err, out)
			return 1
		}
		// Fail early and clearly if the plugin is not linked in, rather than
		// with an "unrecognized directive: mcpi" in every test.
		out, err := exec.Command(caddyBin, "list-modules").Output()
		if err != nil || !bytes.Contains(out, []byte("http.handlers.mcpi")) {
			fmt.Fprintf(os.Stderr, "integration: cmd/caddy does not register http.handlers.mcpi (err=%v)\n", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// freePort returns a TCP port that was free a moment ago. Another process
// could take it before Caddy binds it; the window is small and the tests run
// serially.
func freePort(t *testing.T) int {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		// The kernel may hand a closed port out again at once; a test that
		// asks for two ports and gets one port twice configures two sites
		// on it (Caddy: "ambiguous site definition"). Never give a port
		// twice in one test binary.
		if _, given := portsGiven.LoadOrStore(port, true); !given {
			return port
		}
	}
}

// portsGiven holds every port freePort returned in this test binary.
var portsGiven sync.Map

// record is one request as the upstream received it.
type record struct {
	Method string
	Path   string
	Host   string
	Header http.Header
	Body   []byte
}

// recorder wraps the upstream and saves every request it receives, so tests
// can assert exactly what the edge forwarded (and that it forwarded nothing
// when it should not have).
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	reqs []record
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, record{Method: r.Method, Path: r.URL.Path, Host: r.Host, Header: r.Header.Clone(), Body: body})
	rec.mu.Unlock()
	rec.next.ServeHTTP(w, r)
}

// Requests returns a copy of what has been recorded so far.
func (rec *recorder) Requests() []record {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]record(nil), rec.reqs...)
}

// Reset forgets the recorded requests (between subtests).
func (rec *recorder) Reset() {
	rec.mu.Lock()
	rec.reqs = nil
	rec.mu.Unlock()
}

// syncBuffer collects Caddy's output from the process's copy goroutine and
// the test goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// harness is one Caddy process in front of one recorded demo MCP server.
type harness struct {
	t        *testing.T
	port     int
	base     string // http://127.0.0.1:<port>
	upstream *recorder
	output   *syncBuffer
	// perRequest, when set, adjusts every request an SDK client sends
	// (after its fixed headers): a fresh presentation for each, as an
	// agent must send, since the edge takes each presentation once.
	perRequest func(*http.Request)
}

// siteConfig fills the standard test site.
type siteConfig struct {
	// TrustedIssuer, if set, adds the route /trusted/* that trusts only it.
	TrustedIssuer string
	// DIDWebIssuer, if set, adds the route /didweb/* that trusts only it and
	// may fetch did:web documents from loopback over http.
	DIDWebIssuer string
}

// hostAudience is the audience the edge derives by default for requests to
// this harness (did:web:<host> with the port %3A-encoded).
func (h *harness) hostAudience() string {
	return "did:web:127.0.0.1%3A" + strconv.Itoa(h.port)
}

// siteBlock renders the site. Routes:
//
//	/id/*      mcpi (trust any), the verified identity forwarded with header_up
//	/scoped/*  mcpi (trust any) requiring the scope files:write
//	/trusted/* mcpi trusting only cfg.TrustedIssuer (if set)
//	/didweb/*  mcpi trusting only cfg.DIDWebIssuer, did:web over loopback http
//	else       mcpi (trust any, an authorization server listed), plain reverse_proxy
func siteBlock(port int, upstream string, cfg siteConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, ":%d {\n\tbind 127.0.0.1\n", port)
	fmt.Fprintf(&b, `	handle_path /id/* {
		mcpi {
			trust any
		}
		reverse_proxy %[1]s {
			header_up X-Agent-DID {mcpi.agent_did}
			header_up X-User-DID {mcpi.user_did}
			header_up X-Edge-Scopes {mcpi.scopes}
			header_up X-Edge-Issuer {mcpi.issuer}
			header_up X-Edge-Delegation-Id {mcpi.delegation_id}
			header_up X-Edge-User-Id {http.auth.user.id}
		}
	}
	handle_path /scoped/* {
		mcpi {
			trust any
			require_scopes files:write
		}
		reverse_proxy %[1]s
	}
`, upstream)
	if cfg.TrustedIssuer != "" {
		fmt.Fprintf(&b, "\thandle_path /trusted/* {\n\t\tmcpi {\n\t\t\ttrust %s\n\t\t}\n\t\treverse_proxy %s\n\t}\n", cfg.TrustedIssuer, upstream)
	}
	if cfg.DIDWebIssuer != "" {
		fmt.Fprintf(&b, "\thandle_path /didweb/* {\n\t\tmcpi {\n\t\t\ttrust %s\n\t\t\tallow_private_did_web\n\t\t\tdid_web_timeout 2s\n\t\t}\n\t\treverse_proxy %s\n\t}\n", cfg.DIDWebIssuer, upstream)
	}
	fmt.Fprintf(&b, `	handle {
		mcpi {
			trust any
			authorization_servers https://auth.example.test
		}
		reverse_proxy %s
	}
}
`, upstream)
	return b.String()
}

// newHarness starts the recorded demo MCP server and Caddy in front of it.
// Everything is stopped when the test ends; Caddy's output is logged if the
// test failed.
func newHarness(t *testing.T, cfg siteConfig) *harness {
	t.Helper()
	rec := &recorder{next: mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	caddyfile := testCaddyfile(freePort(t), filepath.Join(dir, "storage"), siteBlock(h.port, up.Listener.Addr().String(), cfg))
	h.start(dir, caddyfile)
	return h
}

// serveUpstream serves hd on a loopback httptest.Server closed when the test
// ends.
func serveUpstream(t *testing.T, hd http.Handler) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(hd)
	t.Cleanup(func() {
		// Streams still open from the upstream's side (the SDK's standalone
		// GET stream) would make Close wait for them.
		up.CloseClientConnections()
		up.Close()
	})
	return up
}

// newEdgeHarness is the harness of a Caddy about to listen on a free
// loopback port in front of rec.
func newEdgeHarness(t *testing.T, rec *recorder) *harness {
	h := &harness{t: t, port: freePort(t), upstream: rec, output: &syncBuffer{}}
	h.base = "http://127.0.0.1:" + strconv.Itoa(h.port)
	return h
}

// testCaddyfile is site after the tests' global options: the admin API on
// adminPort, no HTTPS, nothing persisted or installed, Caddy's storage at
// storageRoot.
func testCaddyfile(adminPort int, storageRoot, site string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	auto_https off
	persist_config off
	skip_install_trust
	grace_period 1ns
	storage file_system {
		root %s
	}
}

%s`, adminPort, storageRoot, site)
}

// start runs Caddy on caddyfile (written into dir, with env added to its
// environment) until the test ends, probing h's protected resource
// metadata, then forgets the requests the upstream saw: the probe is not
// part of any test's story.
func (h *harness) start(dir, caddyfile string, env ...string) {
	h.t.Helper()
	startCaddy(h.t, dir, caddyfile, h.base+"/.well-known/oauth-protected-resource", h.output, env...)
	h.upstream.Reset()
}

// startCaddy writes caddyfile into dir and runs the Caddy binary on it until
// the test ends, returning once probe answers HTTP (any status: the listener
// is bound only after the whole config provisioned). Output goes to out and
// is logged, with the Caddyfile, if the test failed. env is added to Caddy's
// environment (not to the test process's).
func startCaddy(t *testing.T, dir, caddyfile, probe string, out *syncBuffer, env ...string) {
	t.Helper()
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(caddyBin, "run", "--config", path, "--adapter", "caddyfile")
	// Keep Caddy's data and config dirs (autosave, locks) out of the
	// developer's home.
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	cmd.Env = append(cmd.Env, env...)
	exited := startProcess(t, cmd, out, func() string {
		return fmt.Sprintf("Caddyfile:\n%s\nCaddy output:\n%s", caddyfile, out.String())
	})
	waitHTTP(t, probe, exited)
}

// startProcess starts cmd with its output going to out, and kills it when
// the test ends, logging report() if the test failed. The returned channel
// receives cmd's exit, so a caller waiting for readiness can notice a
// process that died during startup.
func startProcess(t *testing.T, cmd *exec.Cmd, out *syncBuffer, report func() string) chan error {
	t.Helper()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Log(report())
		}
	})
	return exited
}

// waitHTTP polls url until it answers HTTP, failing after 60s (a loaded
// two-core machine running the race detector can take that long to start
// Caddy) or if the process behind exited reports that it stopped.
func waitHTTP(t *testing.T, url string, exited chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err // let the cleanup's receive return
			t.Fatalf("process exited during startup: %v", err)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 60s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testContext is bounded so that a hung stream fails the test instead of the
// whole package timing out.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
