//go:build redteam

// Red-team tests that FAIL on the current code, end to end through the real
// Caddy binary: each demonstrates a bypass. Behind the redteam build tag so
// the branch stays green; run with
//
//	go test -tags redteam ./integration/ -run Redteam
package integration

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// TestRedteamToolsListDuplicateIDsSDK: the real Go-SDK server (batches are
// accepted for protocol 2025-03-26). An anonymous agent sends tools/list and
// ping under one id in a batch; the edge's request-id map keeps the last
// method (ping), so the tools/list answer is not filtered.
func TestRedteamToolsListDuplicateIDsSDK(t *testing.T) {
	h := newPolicyHarness(t, policyConfig)
	ctx := testContext(t)
	const oldProtocol = "2025-03-26"
	for _, path := range []string{policyJSONPath, mcpserver.Path} {
		t.Run(path, func(t *testing.T) {
			session := rawInitialize(ctx, t, h, path, oldProtocol)
			batch := `[{"jsonrpc":"2.0","id":7,"method":"tools/list"},{"jsonrpc":"2.0","id":7,"method":"ping"}]`
			resp := rawPost(ctx, t, h, path, batch, http.Header{"Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {oldProtocol}})
			if resp.Status != http.StatusOK {
				t.Fatalf("batch: HTTP %d %s", resp.Status, resp.Body)
			}
			var listed []string
			for _, m := range resp.Msgs {
				res, _ := m["result"].(map[string]any)
				tools, _ := res["tools"].([]any)
				for _, tl := range tools {
					name, _ := tl.(map[string]any)["name"].(string)
					listed = append(listed, name)
				}
			}
			// whoami is the only anonymous tool of policyConfig.
			if slices.ContainsFunc(listed, func(n string) bool { return n != "whoami" }) {
				t.Fatalf("BYPASS: anonymous agent got the unfiltered tool list %v", listed)
			}
			if len(listed) == 0 {
				t.Logf("upstream did not answer the tools/list of the batch: %s", resp.Body)
			}
		})
	}
}

// rawInitialize runs initialize + notifications/initialized with no
// credential, at the given protocol version, and returns the session id.
func rawInitialize(ctx context.Context, t *testing.T, h *harness, path, version string) string {
	t.Helper()
	resp := rawPost(ctx, t, h, path, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"rt","version":"0"}}}`, version), nil)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.Status != http.StatusOK || session == "" {
		t.Fatalf("initialize: HTTP %d %s", resp.Status, resp.Body)
	}
	n := rawPost(ctx, t, h, path, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		http.Header{"Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {version}})
	if n.Status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d %s", n.Status, n.Body)
	}
	return session
}

// TestRedteamConnectionDropsIdentity: a client lists the edge's identity
// headers in its Connection header. The edge sets them (injectIdentity),
// then reverse_proxy, treating every name in Connection as hop-by-hop,
// deletes them: the upstream receives an admitted request with no
// X-Agent-DID, X-User-DID or X-Verified-Delegation. No identity is forged,
// but the agent can appear anonymous to an upstream that serves anonymous
// callers differently (and can keep X-Agent-DID while dropping only
// X-Verified-Delegation, steering an upstream that falls back).
func TestRedteamConnectionDropsIdentity(t *testing.T) {
	rec := &recorder{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	h.start(dir, testCaddyfile(freePort(t), filepath.Join(dir, "storage"), level2Site(h.port, up.Listener.Addr().String(), "level 2")))
	w := newWorld(t, h)
	resp := rawPost(testContext(t), t, h, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, http.Header{
		"Authorization": {"Bearer " + w.jwt(t)},
		"Connection":    {"X-Agent-DID, X-User-DID, X-Verified-Delegation"},
	})
	reqs := h.upstream.Requests()
	if resp.Status != http.StatusOK || len(reqs) != 1 {
		t.Fatalf("precondition: HTTP %d, %d upstream requests", resp.Status, len(reqs))
	}
	for _, k := range []string{"X-Agent-Did", "X-User-Did", "X-Verified-Delegation"} {
		if reqs[0].Header.Get(k) == "" {
			t.Errorf("WEAK: admitted request reached the upstream without the edge's %s (dropped through Connection)", k)
		}
	}
}
