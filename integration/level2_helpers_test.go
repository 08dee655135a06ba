package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// Level 2 needs what newHarness keeps to itself: the upstream's address
// before the Caddyfile is written (for `upstream` and auto mode), an
// upstream handler wrapped by the test (to serve /.well-known/mcp-i.json or
// an MCP-I-Version header), a storage folder shared by two Caddy processes,
// and Level 2 lines in the mcpi block. These helpers run Caddy the same way
// (startCaddy) with a site of their own (level2Site).

// newRecordedUpstream starts the recorded demo MCP server; wrap, if not nil,
// sits in front of the recorder (what it answers itself is not recorded).
func newRecordedUpstream(t *testing.T, wrap func(http.Handler) http.Handler) (*recorder, *httptest.Server) {
	t.Helper()
	rec := &recorder{next: mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})}
	var hd http.Handler = rec
	if wrap != nil {
		hd = wrap(rec)
	}
	return rec, serveUpstream(t, hd)
}

// edge is one Caddy process of a Level 2 test.
type edge struct {
	*harness
	dir       string // HOME of the process; holds the Caddyfile
	caddyfile string // path of the Caddyfile
}

// level2Site is one catch-all route: mcpi (trust any, plus the lines of
// extra) in front of reverse_proxy to upstream.
func level2Site(port int, upstream, extra string) string {
	return fmt.Sprintf(`:%d {
	bind 127.0.0.1
	handle {
		mcpi {
			trust any
%s
		}
		reverse_proxy %s
	}
}
`, port, indentLines(extra, "\t\t\t"), upstream)
}

// indentLines prefixes every line of s, trimmed.
func indentLines(s, prefix string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = prefix + strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

// startEdge runs Caddy in front of up (recorded by rec) with level2Site,
// its storage in storageDir (pass the same folder to share the edge's key
// between instances). "{upstream}" in extra is replaced by the upstream's
// origin.
func startEdge(t *testing.T, rec *recorder, up *httptest.Server, storageDir, extra string) *edge {
	t.Helper()
	e := &edge{harness: newEdgeHarness(t, rec), dir: t.TempDir()}
	e.caddyfile = filepath.Join(e.dir, "Caddyfile")
	extra = strings.ReplaceAll(extra, "{upstream}", up.URL)
	caddyfile := testCaddyfile(freePort(t), storageDir, level2Site(e.port, up.Listener.Addr().String(), extra))
	e.start(e.dir, caddyfile)
	return e
}

// newLevel2Edge is one edge with its own storage in front of the recorded
// demo server.
func newLevel2Edge(t *testing.T, extra string) *edge {
	t.Helper()
	rec, up := newRecordedUpstream(t, nil)
	return startEdge(t, rec, up, t.TempDir(), extra)
}

// send makes one credentialed JSON-RPC request through the edge (an
// initialize, so the demo server answers it without a session) and returns
// what the upstream received for it.
func (e *edge) send(t *testing.T, hdr http.Header) record {
	t.Helper()
	e.upstream.Reset()
	ctx := testContext(t)
	resp := e.post(ctx, "/mcp", hdr, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": legacyProtocol,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "level2", "version": "0"},
	}})
	if resp.Status != http.StatusOK {
		t.Fatalf("initialize through the edge: HTTP %d %s", resp.Status, resp.Body)
	}
	reqs := e.upstream.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream saw %d requests, want 1", len(reqs))
	}
	return reqs[0]
}

// jwks fetches the edge's /.well-known/jwks.json.
func (e *edge) jwks(t *testing.T) jwk.Set {
	t.Helper()
	return fetchJWKS(t, e.base)
}

func fetchJWKS(t *testing.T, base string) jwk.Set {
	t.Helper()
	resp, err := http.Get(base + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET jwks.json: HTTP %d %v %s", resp.StatusCode, err, body)
	}
	set, err := jwk.Parse(body)
	if err != nil {
		t.Fatalf("jwks.json is not a JWK set: %v: %s", err, body)
	}
	return set
}

// jsonDecode decodes a response body of at most 1 MiB.
func jsonDecode(resp *http.Response, v any) error {
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

// jwksKids lists the key ids of a JWK set.
func jwksKids(set jwk.Set) []string {
	var kids []string
	for i := range set.Len() {
		k, _ := set.Key(i)
		kids = append(kids, k.KeyID())
	}
	return kids
}

// verifyJOSE verifies an X-Verified-Delegation with jwx, as any JOSE library
// would: signature against set (by kid), exp/iat, aud.
func verifyJOSE(tok string, set jwk.Set, aud string) (jwt.Token, error) {
	return jwt.Parse([]byte(tok), jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithAudience(aud))
}

// assertionKid is the kid in an assertion's protected header.
func assertionKid(t *testing.T, tok string) string {
	t.Helper()
	msg, err := jws.Parse([]byte(tok))
	if err != nil {
		t.Fatalf("X-Verified-Delegation is not a JWS: %v", err)
	}
	return msg.Signatures()[0].ProtectedHeaders().KeyID()
}

// rotateKey runs `caddy mcpi rotate-key` against the config of e (so its
// storage), as an operator would.
func (e *edge) rotateKey(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, caddyBin, "mcpi", "rotate-key", "--config", e.caddyfile, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+e.dir, "XDG_DATA_HOME="+e.dir, "XDG_CONFIG_HOME="+e.dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("caddy mcpi rotate-key: %v\n%s", err, stderrOf(err))
	}
	return string(out)
}

// poll runs cond every 100ms until it holds, failing after limit.
func poll(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
