package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// TestPolicyBatch: a JSON-RPC batch holding an allowed and a denied
// tools/call is answered by the edge as edge/toolpolicy documents:
// the denied calls get their tool error results (auth_required with a
// consent link for a missing scope, tool_not_allowed for default deny),
// every other request a JSON-RPC error asking to send it alone, the
// notification no answer; nothing of the batch reaches the upstream. A batch
// of allowed calls only is forwarded (the session speaks 2025-03-26, whose
// batches the SDK server runs), and the refused call succeeds on its own.
func TestPolicyBatch(t *testing.T) {
	m := newPolicyRoutesHarness(t)
	w := m.world(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}

	for _, path := range []string{mcpserver.Path, policyJSONPath} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			ctx := testContext(t)
			session := m.initSession(ctx, t, path, auth, pmBatchProtocol)

			// Control: every call allowed, the batch goes upstream.
			m.upstream.Reset()
			resp := m.rawJSON(ctx, path, auth, session, pmBatchProtocol, []any{
				toolCall(21, "greet", map[string]any{"name": "Ada"}),
				toolCall(22, "files_read", nil),
			})
			if resp.Status != http.StatusOK {
				t.Fatalf("allowed batch: HTTP %d %s", resp.Status, resp.Body)
			}
			for _, id := range []int{21, 22} {
				if res := resp.result(t, id); res["isError"] == true {
					t.Errorf("allowed batch, id %d: %v", id, res)
				}
			}
			if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, []string{"greet", "files_read"}) {
				t.Errorf("allowed batch: upstream ran %v, want [greet files_read]", got)
			}

			// One allowed call, two denied ones, a ping and a notification.
			m.upstream.Reset()
			resp = m.rawJSON(ctx, path, auth, session, pmBatchProtocol, []any{
				toolCall(11, "greet", map[string]any{"name": "Ada"}),
				toolCall(12, "files_write", map[string]any{"path": "/x"}),
				toolCall(13, "admin_reset", nil),
				map[string]any{"jsonrpc": "2.0", "id": 14, "method": "ping"},
				map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 99}},
			})
			if resp.Status != http.StatusOK {
				t.Fatalf("mixed batch: HTTP %d %s", resp.Status, resp.Body)
			}
			if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" {
				t.Errorf("mixed batch: Content-Type %q, want application/json", resp.Header.Get("Content-Type"))
			}
			if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
				t.Errorf("mixed batch: Cache-Control %q, want no-store", cc)
			}
			var arr []map[string]any
			if err := json.Unmarshal(resp.Body, &arr); err != nil {
				t.Fatalf("mixed batch: body is not a JSON array: %v: %s", err, resp.Body)
			}
			var ids []float64
			for _, msg := range arr {
				id, _ := msg["id"].(float64)
				ids = append(ids, id)
				if msg["jsonrpc"] != "2.0" {
					t.Errorf("mixed batch: answer %v without jsonrpc 2.0", msg)
				}
			}
			if !slices.Equal(ids, []float64{11, 12, 13, 14}) {
				t.Fatalf("mixed batch: answer ids %v, want [11 12 13 14] (no answer to the notification): %s", ids, resp.Body)
			}
			for _, id := range []int{11, 14} {
				msg := message(t, resp, id)
				e, _ := msg["error"].(map[string]any)
				if e == nil || e["code"] != float64(-32000) || msg["result"] != nil {
					t.Errorf("mixed batch, id %d: %v, want JSON-RPC error -32000", id, msg)
					continue
				}
				if text, _ := e["message"].(string); !strings.Contains(text, "send this request on its own") {
					t.Errorf("mixed batch, id %d: error message %q, want the advice to send it alone", id, text)
				}
			}

			// Missing scope: auth_required with the consent link.
			res := resp.result(t, 12)
			if res["isError"] != true {
				t.Errorf("files_write: isError %v, want true", res["isError"])
			}
			a, _ := rawAction(res).(map[string]any)
			if a["_action"] != "auth_required" || a["provider"] != "mcp-i" {
				t.Fatalf("files_write: handshakeAction %v, want auth_required by mcp-i", a)
			}
			u, err := url.Parse(fmt.Sprint(a["authUrl"]))
			if err != nil || u.Scheme+"://"+u.Host+u.Path != pmConsentURL {
				t.Fatalf("files_write: authUrl %v, want %s?…", a["authUrl"], pmConsentURL)
			}
			q := u.Query()
			if q.Get("tool") != "files_write" || q.Get("scopes") != "files:write" || q.Get("agent_did") != w.agent.did || q.Get("resume_token") == "" {
				t.Errorf("files_write: authUrl query %v", q)
			}

			// No rule, default deny: a plain tool error.
			res = resp.result(t, 13)
			sc, _ := res["structuredContent"].(map[string]any)
			if res["isError"] != true || sc["error"] != "tool_not_allowed" || sc["toolName"] != "admin_reset" {
				t.Errorf("admin_reset: %v, want the tool_not_allowed tool error", res)
			}

			if reqs := m.upstream.Requests(); len(reqs) != 0 {
				t.Errorf("mixed batch: the upstream received %d request(s), tools/call %v; want none", len(reqs), upstreamToolCalls(reqs))
			}

			// A batch of one denied call is still answered with an array.
			resp = m.rawJSON(ctx, path, auth, session, pmBatchProtocol, []any{toolCall(15, "files_write", nil)})
			if resp.Status != http.StatusOK || !bytes.HasPrefix(bytes.TrimSpace(resp.Body), []byte("[")) {
				t.Fatalf("one-call batch: HTTP %d %s, want 200 with a JSON array", resp.Status, resp.Body)
			}
			if res := resp.result(t, 15); res["isError"] != true {
				t.Errorf("one-call batch: %v, want isError", res)
			}
			if reqs := m.upstream.Requests(); len(reqs) != 0 {
				t.Errorf("one-call batch: the upstream received %d request(s)", len(reqs))
			}

			// As advised, the refused request succeeds on its own.
			resp = m.rawJSON(ctx, path, auth, session, pmBatchProtocol, toolCall(16, "greet", map[string]any{"name": "Ada"}))
			if resp.Status != http.StatusOK {
				t.Fatalf("greet alone: HTTP %d %s", resp.Status, resp.Body)
			}
			res = resp.result(t, 16)
			content, _ := res["content"].([]any)
			if res["isError"] == true || len(content) != 1 || content[0].(map[string]any)["text"] != "Hello, Ada" {
				t.Errorf("greet alone: %v", res)
			}
			if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, []string{"greet"}) {
				t.Errorf("greet alone: upstream ran %v, want [greet]", got)
			}
		})
	}
}
