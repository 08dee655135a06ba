package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestKYAOSAmbiguousMethodRefused, through the
// real Caddy, on a route with request_proof required and require_extension
// and no tool policy, in front of an encoding/json upstream: a bare
// credential (no proof, no declaration) with "method":"ping" beside
// "Method":"tools/call", which that upstream runs as a tools/call, is
// refused 400/-32600 in both eras and nothing reaches the upstream; a plain
// ping passes. On a route with require_extension alone, an undeclared
// tools/call in a batch gets -32021.
func TestKYAOSAmbiguousMethodRefused(t *testing.T) {
	h := startL3Edge(t, "level 2\nrequest_proof required\nrequire_extension", jsonRPCUpstream(), sharedStorage(t))
	w := newWorld(t, h)
	cred := w.jwt(t)
	ctx := testContext(t)
	const meta26 = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	const f1 = `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"delete_everything","arguments":{}%s}}`

	for _, era := range []string{"2025", "2026"} {
		meta := ""
		if era == "2026" {
			meta = meta26
		}
		body := strings.Replace(f1, "%s", meta, 1)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("KYA-OS-Delegation-Credential", cred)
		if era == "2026" {
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "ping")
		}
		h.upstream.Reset()
		resp := h.do(req)
		var e struct{ Error struct{ Code int } }
		if resp.Status != http.StatusBadRequest || json.Unmarshal(resp.Body, &e) != nil || e.Error.Code != -32600 {
			t.Errorf("%s: HTTP %d %s, want 400 with -32600", era, resp.Status, resp.Body)
		}
		if n := len(h.upstream.Requests()); n != 0 {
			t.Errorf("%s: %d requests reached the upstream", era, n)
		}
	}
	h.upstream.Reset()
	if resp := sendRaw(ctx, t, h, cred, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); resp.Status != http.StatusOK || len(h.upstream.Requests()) != 1 {
		t.Fatalf("plain ping: HTTP %d %s", resp.Status, resp.Body)
	}

	// A batch on a route where request_proof is optional.
	h2 := startL3Edge(t, "require_extension", jsonRPCUpstream(), sharedStorage(t))
	resp := sendRaw(ctx, t, h2, newWorld(t, h2).jwt(t), "["+kyaosCall+"]")
	var e struct{ Error struct{ Code int } }
	if json.Unmarshal(resp.Body, &e) != nil || e.Error.Code != -32021 || len(h2.upstream.Requests()) != 0 {
		t.Fatalf("undeclared batch: HTTP %d %s, %d upstream requests", resp.Status, resp.Body, len(h2.upstream.Requests()))
	}
}
