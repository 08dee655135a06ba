package integration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRequestAndResponseRefused through the real Caddy: on a route without
// a tool policy (the URL guard at its default, enforce), a body whose
// message has both "method" and "result" is refused 400 with -32600 in
// both eras, and the upstream never sees it: the Go SDK would run it as a
// tools/call whose answer the edge could not check, and whose 2026 headers
// it could not compare with the body.
func TestRequestAndResponseRefused(t *testing.T) {
	h := startPolicyEdge(t, answerWith(func(id string, _ url.Values) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[]}}`
	}), "level 2")
	w := newWorld(t, h)
	tok := w.jwt(t)
	mixed := func(body string) string {
		return strings.Replace(body, `"method":`, `"result":{},"method":`, 1)
	}
	call := map[string]any{"name": "t", "arguments": map[string]any{}}
	for _, tc := range []struct {
		name string
		body string
		hdr  http.Header
	}{
		{"2026", mixed(modernBody(6, "tools/call", call)), modernHeaders(tok, "tools/call", "t")},
		{"2025", mixed(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"t","arguments":{}}}`),
			http.Header{"Authorization": {"Bearer " + tok}, "Mcp-Protocol-Version": {legacyProtocol}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.upstream.Reset()
			resp := rawPost(testContext(t), t, h, "/mcp", tc.body, tc.hdr)
			if n := len(h.upstream.Requests()); n != 0 {
				t.Fatalf("forwarded %d request(s): HTTP %d %s", n, resp.Status, resp.Body)
			}
			if resp.Status != http.StatusBadRequest || len(resp.Msgs) != 1 {
				t.Fatalf("HTTP %d %s, want 400 with one JSON-RPC error", resp.Status, resp.Body)
			}
			e, _ := resp.Msgs[0]["error"].(map[string]any)
			if code, _ := e["code"].(float64); code != -32600 || !strings.Contains(e["message"].(string), `"method" and also "result"`) {
				t.Fatalf("error %v, want -32600 saying why", e)
			}
		})
	}
	// The control: the call alone reaches the upstream.
	h.upstream.Reset()
	body := modernBody(7, "tools/call", call)
	if resp := rawPost(testContext(t), t, h, "/mcp", body, modernHeaders(tok, "tools/call", "t")); len(h.upstream.Requests()) != 1 || resp.Status != http.StatusOK {
		t.Fatalf("plain call: HTTP %d %s", resp.Status, resp.Body)
	}
}
