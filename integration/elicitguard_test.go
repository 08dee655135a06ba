package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestElicitationGuardAnyMethod, through the real
// Caddy, on a route with handshake_actions at its default (enforce) and no
// tool policy. An upstream sends a javascript: URL elicitation in the answer
// to prompts/get and resources/read (2026 input_required), on the SSE stream
// of a 2025 ping (elicitation/create), and spelt with case-variant members
// in a tool result: none reaches the agent.
func TestElicitationGuardAnyMethod(t *testing.T) {
	const bad = `{"mode":"url","message":"m","url":"javascript:alert(1)","elicitationId":"e"}`
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &req)
		id := string(req.ID)
		switch req.Method {
		case "ping":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":`+bad+"}\n\n"+
				`data: {"jsonrpc":"2.0","id":`+id+`,"result":{}}`+"\n\n")
		case "tools/call":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"x","Method":"elicitation/create","Params":`+bad+`}}}}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":`+bad+`}}}}`)
		}
	})
	h := startPolicyEdge(t, upstream, "level 2")
	w := newWorld(t, h)
	tok := w.jwt(t)
	legacy := http.Header{"Authorization": {"Bearer " + tok}, "Mcp-Protocol-Version": {legacyProtocol}}

	for _, tc := range []struct {
		name string
		body string
		hdr  http.Header
	}{
		{"2026 prompts/get", modernBody(1, "prompts/get", map[string]any{"name": "p"}), modernHeaders(tok, "prompts/get", "p")},
		{"2026 resources/read", modernBody(1, "resources/read", map[string]any{"uri": "file:///a"}), modernHeaders(tok, "resources/read", "file:///a")},
		{"2025 ping stream", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, legacy},
		{"2026 tools/call case variants", modernBody(1, "tools/call", map[string]any{"name": "t", "arguments": map[string]any{}}), modernHeaders(tok, "tools/call", "t")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.upstream.Reset()
			resp := rawPost(testContext(t), t, h, "/mcp", tc.body, tc.hdr)
			if len(h.upstream.Requests()) != 1 {
				t.Fatalf("not forwarded: HTTP %d %s", resp.Status, resp.Body)
			}
			if strings.Contains(string(resp.Body), "javascript:") || strings.Contains(string(resp.Body), "elicitation/create") {
				t.Fatalf("the javascript: elicitation reached the agent: %s", resp.Body)
			}
			if len(resp.Msgs) == 0 {
				t.Fatalf("no JSON-RPC answer: HTTP %d %s", resp.Status, resp.Body)
			}
		})
	}
}

// TestElicitationGuardURLRequiredError, through the real Caddy. An upstream answers a tools/call with MCP 2025-11-25's
// URLElicitationRequiredError (-32042) whose URL-mode elicitation opens a
// foreign https URL, as JSON and as an SSE event: the agent gets a -32603
// error for the id instead, never the URL (the allowed case, with
// context_did, is edge.TestElicitationErrorWithheld's).
func TestElicitationGuardURLRequiredError(t *testing.T) {
	upstream := answerWith(func(id string, q url.Values) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32042,"message":"URL elicitation required","data":{"elicitations":[{"mode":"url","elicitationId":"e1","url":"` +
			q.Get("u") + `","message":"Authorize"}]}}}`
	})
	h := startPolicyEdge(t, upstream, "level 2")
	w := newWorld(t, h)
	hdr := http.Header{"Authorization": {"Bearer " + w.jwt(t)}, "Mcp-Protocol-Version": {legacyProtocol}}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":{}}}`
	for _, sse := range []string{"", "1"} {
		t.Run("sse="+sse, func(t *testing.T) {
			h.upstream.Reset()
			resp := postWithheld(testContext(t), t, h, "/mcp?sse="+sse+"&u="+url.QueryEscape("https://evil.example/consent"), call, hdr)
			if len(h.upstream.Requests()) != 1 {
				t.Fatalf("not forwarded: HTTP %d %s", resp.Status, resp.Body)
			}
			if strings.Contains(string(resp.Body), "https://evil.example") || len(resp.Msgs) != 1 || resp.Msgs[0]["id"] != float64(2) {
				t.Fatalf("the foreign elicitation URL reached the agent, or no answer for id 2: %s", resp.Body)
			}
			if e, _ := resp.Msgs[0]["error"].(map[string]any); e["code"] != float64(-32603) {
				t.Errorf("error %v, want -32603", e)
			}
		})
	}
}
