package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// TestLevel3DiscoveryPerHost: `handshake proxy` with
// no endpoints and no `upstream` discovers the upstream's endpoints through
// the route. On a catch-all site whose upstream answers per Host, one
// handshake with "Host: evil.test" must not make the edge fetch the
// attacker's mcp-i.json (naming the attacker's origin), cache it for every
// Host, and send every later agent's handshake and verify, credential
// included, to the attacker: a document fetched through the route yields
// only paths on the upstream, and discovery is cached per Host.
func TestLevel3DiscoveryPerHost(t *testing.T) {
	var stolen atomic.Int32
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"challenge":"c0ffeec0ffeec0ffee","nonce":"attackernonce000","supportedMethods":["Ed25519"],"expiresIn":300}}`))
	}))
	t.Cleanup(attacker.Close)

	var issued atomic.Int32
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/.well-known/mcp-i.json" && r.Host == "evil.test":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"mcp_i":{"version":"2.0.0","endpoints":{"handshake":%q,"verify":%q}}}`, attacker.URL+"/rpc", attacker.URL+"/rpc")
		case r.URL.Path == l3HandshakePath:
			n := issued.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"challenge":"a0b1c2d3e4f5%04d","nonce":"upstreamnonce%04d","supportedMethods":["Ed25519"],"expiresIn":300}}`, n, n)
		default:
			http.NotFound(w, r)
		}
	})
	rec := &recorder{next: upstream}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	site := fmt.Sprintf(`:%d {
	bind 127.0.0.1
	mcpi {
		trust any
		level 3
		handshake proxy
	}
	reverse_proxy %s
}
`, h.port, up.Listener.Addr().String())
	h.start(dir, testCaddyfile(freePort(t), filepath.Join(dir, "storage"), site))

	handshake := func(host string) (int, map[string]any) {
		t.Helper()
		agent := newParty(t, didresolver.Ed25519)
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "handshake",
			"params": map[string]any{"agentDid": agent.did, "supportedMethods": []string{"Ed25519"}, "version": "1.0"}})
		req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, h.base+l3HandshakePath, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}

	// The attacker's own handshake: the document's foreign origin is
	// ignored; the call goes to the upstream's default path.
	if status, out := handshake("evil.test"); status != http.StatusOK || out["result"] == nil {
		t.Fatalf("handshake with Host evil.test: HTTP %d %v", status, out)
	}
	// A victim's handshake on the site's own name.
	victimHost := fmt.Sprintf("127.0.0.1:%d", h.port)
	status, out := handshake(victimHost)
	if n := stolen.Load(); n != 0 {
		t.Fatalf("BYPASS: the attacker's origin received %d handshake calls", n)
	}
	res, _ := out["result"].(map[string]any)
	if status != http.StatusOK || res == nil || res["nonce"] == "attackernonce000" {
		t.Fatalf("victim handshake: HTTP %d %v", status, out)
	}
	var victimCalls int
	for _, r := range rec.Requests() {
		if r.Path == l3HandshakePath && r.Host == victimHost {
			victimCalls++
		}
	}
	if victimCalls != 1 {
		t.Fatalf("the upstream got %d handshake calls for %s, want 1: %+v", victimCalls, victimHost, rec.Requests())
	}
}
