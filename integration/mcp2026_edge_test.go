package integration

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The 2026-07-28 behaviours at the edge, seen by the official
// TypeScript SDK v2 client and by raw requests: filtered lists private,
// the edge's own results readable (resultType), framing headers checked
// before anything is forwarded, URL-mode elicitations guarded like
// handshake actions.

// TestMCP2026FilteredListPrivate: a tools/list the per-caller policy
// filtered leaves the edge with cacheScope "private" (the upstream said
// "public"), ttlMs kept, over SSE and JSON; with the TypeScript SDK's shared
// response cache (one store, one partition per agent) neither agent is
// served the other's list.
func TestMCP2026FilteredListPrivate(t *testing.T) {
	h := newMCP2026Harness(t)
	w := newWorld(t, h)
	tok := w.jwt(t)

	for _, path := range []string{mcpserver.Path, policyJSONPath} {
		t.Run("raw"+path, func(t *testing.T) {
			ctx := testContext(t)
			resp := rawPost(ctx, t, h, path, modernBody(1, "tools/list", nil), modernHeaders(tok, "tools/list", ""))
			if resp.Status != http.StatusOK {
				t.Fatalf("tools/list: HTTP %d %s", resp.Status, resp.Body)
			}
			res := resp.result(t, 1)
			if res["cacheScope"] != "private" {
				t.Errorf("cacheScope %v, want private: the list is filtered for this caller", res["cacheScope"])
			}
			if res["ttlMs"] != float64(60000) {
				t.Errorf("ttlMs %v, want the upstream's 60000", res["ttlMs"])
			}
			if res["resultType"] != "complete" {
				t.Errorf("resultType %v, want complete", res["resultType"])
			}
		})
	}

	t.Run("TypeScript shared cache", func(t *testing.T) {
		// The writer: another agent of the same user, allowed files:write.
		writer := newParty(t, didresolver.Ed25519)
		writerTok := w.jwt(t, func(tm *vc.Template) {
			tm.AgentDID = writer.did
			tm.Scopes = append(tm.Scopes, "files:write")
		})
		u := h.base + mcpserver.Path
		for _, order := range []struct {
			name   string
			tokens []string
			write  []bool // whether each list must show files_write
		}{
			{"reader first", []string{tok, writerTok}, []bool{false, true}},
			{"writer first", []string{writerTok, tok}, []bool{true, false}},
		} {
			res := runTS(t, u, "sharedcache", map[string]any{"tokens": order.tokens}).mustSucceed(t, order.name)
			for i, list := range res.Lists {
				if got := slices.Contains(list, "files_write"); got != order.write[i] {
					t.Errorf("%s: client %d listed %v: another agent's list served from the shared cache", order.name, i, list)
				}
			}
		}
	})
}

// TestMCP2026DeniedCallReadable: a call the policy denies is answered by
// the edge with a result the TypeScript v2 client accepts (resultType set,
// never INVALID_RESULT), in both eras: the agent sees the consent URL. A
// client that declared URL-mode elicitation is asked to open the consent
// URL instead. The upstream never runs the tool.
func TestMCP2026DeniedCallReadable(t *testing.T) {
	h := newMCP2026Harness(t)
	w := newWorld(t, h)
	tok := w.jwt(t)
	u := h.base + mcpserver.Path

	checkConsent := func(t *testing.T, raw string) {
		t.Helper()
		cu, err := url.Parse(raw)
		if err != nil || cu.Host != "consent.example.test" {
			t.Fatalf("consent URL %q", raw)
		}
		q := cu.Query()
		if q.Get("tool") != "files_write" || q.Get("scopes") != "files:write" || q.Get("agent_did") != w.agent.did || q.Get("resume_token") == "" {
			t.Errorf("consent URL query %v", q)
		}
	}

	for _, era := range []string{modernProtocol, legacyProtocol} {
		t.Run(era, func(t *testing.T) {
			h.upstream.Reset()
			res := runTS(t, u, "call", map[string]any{"token": tok, "era": era, "tool": "files_write", "args": map[string]any{"path": "/x"}}).
				mustSucceed(t, "files_write (missing scope)")
			sc, _ := res.Result["structuredContent"].(map[string]any)
			meta, _ := sc["_meta"].(map[string]any)
			action, _ := meta["handshakeAction"].(map[string]any)
			if res.Result["isError"] != true || action["_action"] != "auth_required" {
				t.Fatalf("files_write = %v, want isError with an auth_required handshake action", res.Result)
			}
			checkConsent(t, action["authUrl"].(string))

			res = runTS(t, u, "call", map[string]any{"token": tok, "era": era, "tool": "admin_reset"}).mustSucceed(t, "admin_reset (no rule)")
			if res.Result["isError"] != true {
				t.Errorf("admin_reset = %v, want isError", res.Result)
			}
			if got := calledTools(h.upstream.Requests()); len(got) != 0 {
				t.Errorf("upstream ran %v", got)
			}
		})
	}

	t.Run("raw resultType", func(t *testing.T) {
		ctx := testContext(t)
		resp := rawPost(ctx, t, h, mcpserver.Path, modernBody(1, "tools/call", map[string]any{"name": "files_write", "arguments": map[string]any{}}),
			modernHeaders(tok, "tools/call", "files_write"))
		if res := resp.result(t, 1); res["resultType"] != "complete" || res["isError"] != true {
			t.Errorf("edge's tools/call result %v, want resultType complete and isError", res)
		}
	})

	t.Run("URL elicitation", func(t *testing.T) {
		h.upstream.Reset()
		res := runTS(t, u, "elicit", map[string]any{"token": tok, "tool": "files_write", "action": "decline", "maxRounds": 1})
		if res.Error != nil && res.Error.Code == "INVALID_RESULT" {
			t.Fatalf("the client could not read the edge's answer: %+v", res.Error)
		}
		if len(res.Elicitations) == 0 {
			t.Fatalf("no elicitation reached the client; result %v error %+v", res.Result, res.Error)
		}
		e := res.Elicitations[0]
		if e["mode"] != "url" {
			t.Errorf("elicitation mode %v, want url", e["mode"])
		}
		checkConsent(t, e["url"].(string))
		if got := calledTools(h.upstream.Requests()); len(got) != 0 {
			t.Errorf("upstream ran %v", got)
		}
	})
}

// TestMCP2026HeaderMismatch: for a 2026 request the edge checks Mcp-Method
// and Mcp-Name against the body before any policy: a missing or different
// header is HTTP 400 with JSON-RPC error -32020 and nothing reaches the
// upstream (the upstream must not be the only one to notice: the edge
// decides on the body, the upstream might route on the header).
func TestMCP2026HeaderMismatch(t *testing.T) {
	h := newMCP2026Harness(t)
	w := newWorld(t, h)
	tok := w.jwt(t)
	call := func(name string) string {
		return modernBody(1, "tools/call", map[string]any{"name": name, "arguments": map[string]any{"name": "Ada"}})
	}
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }

	// The control: matching headers pass, so a refusal below is the
	// mismatch's doing.
	ctx := testContext(t)
	if resp := rawPost(ctx, t, h, mcpserver.Path, call("greet"), modernHeaders(tok, "tools/call", "greet")); resp.Status != http.StatusOK {
		t.Fatalf("matching headers: HTTP %d %s", resp.Status, resp.Body)
	}

	for _, tc := range []struct {
		name string
		body string
		hdr  http.Header
	}{
		{"method header list, body call", call("greet"), modernHeaders(tok, "tools/list", "")},
		{"method header call, body list", modernBody(1, "tools/list", nil), modernHeaders(tok, "tools/call", "greet")},
		{"name header allowed, body denied", call("admin_reset"), modernHeaders(tok, "tools/call", "greet")},
		{"name header denied, body allowed", call("greet"), modernHeaders(tok, "tools/call", "admin_reset")},
		{"base64 name header allowed, body denied", call("admin_reset"), modernHeaders(tok, "tools/call", b64("greet"))},
		{"no method header", call("greet"), func() http.Header {
			hdr := modernHeaders(tok, "tools/call", "greet")
			delete(hdr, "Mcp-Method")
			return hdr
		}()},
		{"no name header", call("greet"), modernHeaders(tok, "tools/call", "")},
		{"resource URI header differs", modernBody(1, "resources/read", map[string]any{"uri": mcpserver.AboutURI}),
			modernHeaders(tok, "resources/read", "mcpi-demo://other")},
		{"protocol version header differs from _meta", call("greet"), func() http.Header {
			hdr := modernHeaders(tok, "tools/call", "greet")
			hdr["Mcp-Protocol-Version"] = []string{legacyProtocol}
			return hdr
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.upstream.Reset()
			resp := rawPost(testContext(t), t, h, mcpserver.Path, tc.body, tc.hdr)
			if resp.Status != http.StatusBadRequest {
				t.Errorf("HTTP %d, want 400; body %s", resp.Status, resp.Body)
			}
			var msg struct {
				ID    any `json:"id"`
				Error struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(resp.Body, &msg); err != nil || msg.Error.Code != -32020 {
				t.Errorf("body %s, want a JSON-RPC error -32020 (HeaderMismatch)", resp.Body)
			}
			if reqs := h.upstream.Requests(); len(reqs) != 0 {
				t.Errorf("upstream saw %d requests: %s", len(reqs), reqs[0].Body)
			}
		})
	}
}

// TestMCP2026URLElicitationGuard: an upstream input_required result whose
// URL-mode elicitation points at a foreign host never reaches the agent;
// one on an allow-listed host does, tagged with the user's DID like a
// handshake action's authUrl, and the retry completes the call.
func TestMCP2026URLElicitationGuard(t *testing.T) {
	h := newMCP2026Harness(t)
	w := newWorld(t, h)
	tok := w.jwt(t)
	u := h.base + mcpserver.Path

	t.Run("foreign", func(t *testing.T) {
		res := runTS(t, u, "elicit", map[string]any{"token": tok, "tool": "elicit_foreign", "maxRounds": 2})
		for _, e := range res.Elicitations {
			if s, _ := e["url"].(string); strings.Contains(s, "evil.example.net") {
				t.Errorf("the foreign URL reached the agent: %v", e)
			}
		}
		if res.Error != nil && res.Error.Code == "INVALID_RESULT" {
			t.Errorf("the client could not read the edge's answer: %+v", res.Error)
		}
		if res.Error == nil && res.Result["isError"] != true {
			t.Errorf("elicit_foreign = %v, want an error result", res.Result)
		}
	})

	t.Run("allowed", func(t *testing.T) {
		h.upstream.Reset()
		res := runTS(t, u, "elicit", map[string]any{"token": tok, "tool": "elicit_allowed"}).mustSucceed(t, "elicit_allowed")
		want := mcpserver.AllowedAuthURL + "&context_did=" + url.QueryEscape(w.user.did)
		if len(res.Elicitations) != 1 || res.Elicitations[0]["url"] != want {
			t.Errorf("elicitations %v, want one to %s", res.Elicitations, want)
		}
		if got := resultText(res.Result); got != mcpserver.ElicitDoneText {
			t.Errorf("elicit_allowed = %v, want %q after the retry", res.Result, mcpserver.ElicitDoneText)
		}
		if got := calledTools(h.upstream.Requests()); !slices.Equal(got, []string{"elicit_allowed", "elicit_allowed"}) {
			t.Errorf("upstream ran %v, want the call and its retry", got)
		}
	})
}

// TestMCP2026UnknownVersion: a request naming a protocol version nobody
// implements (the conformance suite sends "v999.0.0" in the header and in
// _meta, which agree) is answered as the spec requires of the server: 400
// with UnsupportedProtocolVersionError (-32022) listing the supported
// versions and echoing the requested one. A framing error (-32020) would be
// wrong: header and body agree. scripts/conformance.sh's server-stateless
// scenario checks the same through the edge.
func TestMCP2026UnknownVersion(t *testing.T) {
	h := newMCP2026Harness(t)
	w := newWorld(t, h)
	tok := w.jwt(t)
	const unknown = "v999.0.0"
	body := strings.Replace(modernBody(1, "server/discover", nil), `"`+modernProtocol+`"`, `"`+unknown+`"`, 1)
	hdr := modernHeaders(tok, "server/discover", "")
	hdr["Mcp-Protocol-Version"] = []string{unknown}

	resp := rawPost(testContext(t), t, h, mcpserver.Path, body, hdr)
	var msg struct {
		Error struct {
			Code int `json:"code"`
			Data struct {
				Supported []string `json:"supported"`
				Requested string   `json:"requested"`
			} `json:"data"`
		} `json:"error"`
	}
	if len(resp.Msgs) > 0 {
		raw, _ := json.Marshal(resp.Msgs[0])
		_ = json.Unmarshal(raw, &msg)
	}
	if resp.Status != http.StatusBadRequest || msg.Error.Code != -32022 ||
		!slices.Contains(msg.Error.Data.Supported, modernProtocol) || msg.Error.Data.Requested != unknown {
		t.Errorf("HTTP %d %s, want 400 with -32022 listing %s and echoing %s", resp.Status, resp.Body, modernProtocol, unknown)
	}
}
