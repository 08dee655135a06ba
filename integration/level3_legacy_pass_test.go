package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestLegacyPassFoldedParams: the real Caddy with `level 3`,
// `legacy_handshake pass` and a tool policy, in front of an upstream that
// decodes JSON-RPC with encoding/json (as mark3labs/mcp-go does). A request
// without any credential names _mcpi in "params" and another tool in
// "paramſ" (U+017F). The upstream reads "paramſ" as params, so passing it
// as a legacy handshake would run the other tool; the edge compares member
// names by their Unicode fold key, so it is no legacy form.
func TestLegacyPassFoldedParams(t *testing.T) {
	var (
		mu  sync.Mutex
		ran []string
	)
	rec := &recorder{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
			mu.Lock()
			ran = append(ran, msg.Params.Name)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ran %s"}]}}`, msg.ID, msg.Params.Name)
	})}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	h.start(dir, testCaddyfile(freePort(t), filepath.Join(dir, "storage"), level2Site(h.port, up.Listener.Addr().String(), `level 3
		legacy_handshake pass
		tool delete_everything {
			scopes admin:all
		}`)))
	ctx := testContext(t)

	// Control: the plain call without a credential is refused.
	if resp := rawPost(ctx, t, h, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_everything"}}`, nil); resp.Status != http.StatusUnauthorized {
		t.Fatalf("precondition: plain anonymous call answered HTTP %d", resp.Status)
	}
	resp := rawPost(ctx, t, h, "/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"_mcpi"},"paramſ":{"name":"delete_everything"}}`, nil)
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(ran, "delete_everything") {
		t.Fatalf("BYPASS: the upstream ran delete_everything for a request without credential (HTTP %d %s)", resp.Status, resp.Body)
	}
}
