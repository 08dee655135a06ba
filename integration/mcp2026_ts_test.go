package integration

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// TestTS2026Client: the official TypeScript SDK v2 client, pinned to MCP
// 2026-07-28, through the real Caddy (level 2, per-tool policy) in front of
// the Go SDK's stateless server, as an agent uses it: discover, a filtered
// tools/list, an allowed call, progress streamed, subscriptions/listen,
// resources/read, and 401 without a credential.
func TestTS2026Client(t *testing.T) {
	h := newMCP2026Harness(t)
	w := newWorld(t, h)
	tok := w.jwt(t)
	url := h.base + mcpserver.Path
	auth := map[string]any{"token": tok}

	t.Run("discover", func(t *testing.T) {
		h.upstream.Reset()
		res := runTS(t, url, "discover", auth).mustSucceed(t, "discover")
		if res.ProtocolVersion != modernProtocol {
			t.Errorf("negotiated %q, want %s", res.ProtocolVersion, modernProtocol)
		}
		if len(res.HTTP) != 1 || res.HTTP[0].MCPMethod != "server/discover" || res.HTTP[0].Status != http.StatusOK {
			t.Errorf("exchanges %+v, want one server/discover answered 200", res.HTTP)
		}
		if got := rpcMethods(h.upstream.Requests()); !slices.Equal(got, []string{"server/discover"}) {
			t.Errorf("upstream saw %v, want [server/discover] (no initialize in 2026)", got)
		}
		assertNotForwarded(t, h.upstream.Requests(), tok)
	})

	t.Run("tools/list filtered", func(t *testing.T) {
		res := runTS(t, url, "list", auth).mustSucceed(t, "list")
		want := []string{"count", "elicit_allowed", "elicit_foreign", "files_read", "greet", "link_allowed", "link_foreign", "whoami"}
		if !slices.Equal(res.Tools, want) {
			t.Errorf("tools/list = %v, want %v (files_write needs files:write, admin_reset has no rule)", res.Tools, want)
		}
	})

	t.Run("allowed call", func(t *testing.T) {
		h.upstream.Reset()
		res := runTS(t, url, "call", map[string]any{"token": tok, "tool": "whoami"}).mustSucceed(t, "whoami")
		sc, _ := res.Result["structuredContent"].(map[string]any)
		if sc["agent_did"] != w.agent.did || sc["user_did"] != w.user.did || sc["verified_delegation"] != true || sc["authorization"] != false {
			t.Errorf("whoami = %v, want the verified agent and user and no Authorization upstream", sc)
		}
		res = runTS(t, url, "call", map[string]any{"token": tok, "tool": "greet", "args": map[string]any{"name": "Ada"}}).mustSucceed(t, "greet")
		if got := resultText(res.Result); got != "Hello, Ada" || res.Result["isError"] == true {
			t.Errorf("greet = %v", res.Result)
		}
		if got := calledTools(h.upstream.Requests()); !slices.Equal(got, []string{"whoami", "greet"}) {
			t.Errorf("upstream ran %v", got)
		}
		for _, r := range h.upstream.Requests() {
			if m := r.Header.Get("Mcp-Method"); m == "" {
				t.Errorf("upstream request without the Mcp-Method header the 2026 client sent: %s", r.Body)
			}
		}
		assertNotForwarded(t, h.upstream.Requests(), tok)
	})

	t.Run("progress streamed", func(t *testing.T) {
		res := runTS(t, url, "progress", map[string]any{"token": tok, "n": 3}).mustSucceed(t, "count")
		if len(res.Progress) != 3 {
			t.Fatalf("got %d progress notifications, want 3: %+v", len(res.Progress), res.Progress)
		}
		interval := float64(countInterval / time.Millisecond)
		t.Logf("notifications at %+v ms, result at %v ms", res.Progress, res.ResultAtMs)
		if lead := res.ResultAtMs - res.Progress[0].AtMs; lead < 2*interval {
			t.Errorf("first notification arrived only %vms before the result (want >= %vms): the edge buffers the stream", lead, 2*interval)
		}
		for i := 1; i < len(res.Progress); i++ {
			if gap := res.Progress[i].AtMs - res.Progress[i-1].AtMs; gap < interval/3 {
				t.Errorf("notifications %d and %d arrived %vms apart (sent %vms apart): bunched", i, i+1, gap, interval)
			}
		}
	})

	t.Run("subscriptions/listen", func(t *testing.T) {
		h.upstream.Reset()
		res := runTS(t, url, "listen", auth).mustSucceed(t, "listen")
		if res.HonoredFilter["toolsListChanged"] != true {
			t.Errorf("honoredFilter %v, want toolsListChanged acknowledged", res.HonoredFilter)
		}
		if res.Closed != "local" {
			t.Errorf("subscription closed %q, want local (closed by the client)", res.Closed)
		}
		if got := rpcMethods(h.upstream.Requests()); !slices.Contains(got, "subscriptions/listen") {
			t.Errorf("upstream saw %v, no subscriptions/listen", got)
		}
	})

	t.Run("resources/read", func(t *testing.T) {
		res := runTS(t, url, "read", map[string]any{"token": tok, "uri": mcpserver.AboutURI}).mustSucceed(t, "read")
		contents, _ := res.Result["contents"].([]any)
		if len(contents) != 1 || contents[0].(map[string]any)["text"] != mcpserver.AboutText {
			t.Errorf("resources/read = %v", res.Result)
		}
	})

	t.Run("no credential", func(t *testing.T) {
		h.upstream.Reset()
		// Anonymous callers see only the allow_anonymous tool...
		res := runTS(t, url, "list", nil).mustSucceed(t, "anonymous list")
		if !slices.Equal(res.Tools, []string{"whoami"}) {
			t.Errorf("anonymous tools/list = %v, want [whoami]", res.Tools)
		}
		// ...and a call of any other tool is refused with 401.
		res = runTS(t, url, "call", map[string]any{"tool": "greet", "args": map[string]any{"name": "Ada"}})
		if res.Error == nil {
			t.Fatalf("greet without a credential succeeded: %v", res.Result)
		}
		if last := res.HTTP[len(res.HTTP)-1]; last.MCPMethod != "tools/call" || last.Status != http.StatusUnauthorized {
			t.Errorf("last exchange %+v, want tools/call answered 401", last)
		}
		if got := calledTools(h.upstream.Requests()); len(got) != 0 {
			t.Errorf("upstream ran %v", got)
		}
	})
}

// TestTS2025Client: the same TypeScript client speaking 2025-11-25 (the
// initialize handshake) through the same edge and stateless server: the
// older era keeps working.
func TestTS2025Client(t *testing.T) {
	h := newMCP2026Harness(t)
	w := newWorld(t, h)
	tok := w.jwt(t)
	url := h.base + mcpserver.Path

	res := runTS(t, url, "list", map[string]any{"token": tok, "era": legacyProtocol}).mustSucceed(t, "list")
	if !slices.Contains(res.Tools, "greet") || slices.Contains(res.Tools, "files_write") {
		t.Errorf("tools/list = %v, want greet and not files_write", res.Tools)
	}
	if len(res.HTTP) == 0 || res.HTTP[0].MCPMethod != "" {
		t.Errorf("first exchange %+v, want a 2025 initialize (no Mcp-Method header)", res.HTTP)
	}
	h.upstream.Reset()
	res = runTS(t, url, "progress", map[string]any{"token": tok, "era": legacyProtocol, "n": 2}).mustSucceed(t, "count")
	if len(res.Progress) != 2 || resultText(res.Result) != "counted to 2" {
		t.Errorf("count: progress %+v result %v", res.Progress, res.Result)
	}
	if got := rpcMethods(h.upstream.Requests()); !slices.Contains(got, "initialize") {
		t.Errorf("upstream saw %v, want an initialize", got)
	}
	assertNotForwarded(t, h.upstream.Requests(), tok)
}
