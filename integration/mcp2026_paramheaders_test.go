package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// paramUpstream is an MCP server whose tool "route" binds its argument
// region to Mcp-Param-Region (x-mcp-header) in 2026 lists, and leaves the
// annotation out of lists for 2025 clients, as an upstream may. Every call succeeds: whether the headers match is the edge's check.
func paramUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		region := `{"type":"string"}`
		if r.Header.Get("Mcp-Protocol-Version") == modernProtocol {
			region = `{"type":"string","x-mcp-header":"Region"}`
		}
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "tools/list":
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"resultType":"complete","tools":[`+
				`{"name":"route","inputSchema":{"type":"object","properties":{"region":`+region+`}}}]}}`)
		default:
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"resultType":"complete","content":[{"type":"text","text":"ok"}]}}`)
		}
	})
}

// TestMCP2026ParamHeadersCatchAllSite: on a site without a host matcher
// (the policy harness listens on :port), the x-mcp-header bindings the edge
// learned hold under any Host a client writes, and a 2025 list without
// the annotation does not make the edge forget them.
func TestMCP2026ParamHeadersCatchAllSite(t *testing.T) {
	h := startPolicyEdge(t, paramUpstream(), `tool route {
			scopes greet:execute
		}`)
	w := newWorld(t, h)
	tok := w.jwt(t)
	port := strconv.Itoa(h.port)

	post := func(t *testing.T, host, tok, body string, hdr http.Header) rpcResponse {
		t.Helper()
		req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, h.base+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header[k] = v
		}
		if host != "" {
			req.Host = host
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		return h.do(req)
	}
	list2026 := func(t *testing.T) {
		t.Helper()
		if resp := post(t, "", "", modernBody(1, "tools/list", nil), modernHeaders(tok, "tools/list", "")); resp.Status != http.StatusOK {
			t.Fatalf("2026 tools/list: HTTP %d %s", resp.Status, resp.Body)
		}
	}
	call := func(t *testing.T, host, tok, region string) rpcResponse {
		t.Helper()
		hdr := modernHeaders(tok, "tools/call", "route")
		hdr["Mcp-Param-Region"] = []string{region}
		h.upstream.Reset()
		return post(t, host, "", modernBody(2, "tools/call", map[string]any{"name": "route", "arguments": map[string]any{"region": "eu"}}), hdr)
	}
	refused := func(t *testing.T, resp rpcResponse) {
		t.Helper()
		var msg struct {
			Error struct{ Code int } `json:"error"`
		}
		if resp.Status != http.StatusBadRequest || json.Unmarshal(resp.Body, &msg) != nil || msg.Error.Code != -32020 {
			t.Fatalf("HTTP %d %s, want 400 with -32020", resp.Status, resp.Body)
		}
		if reqs := h.upstream.Requests(); len(reqs) != 0 {
			t.Fatalf("the upstream got the call: %s (Mcp-Param-Region %q)", reqs[0].Body, reqs[0].Header.Get("Mcp-Param-Region"))
		}
	}
	forwarded := func(t *testing.T, resp rpcResponse) {
		t.Helper()
		if resp.Status != http.StatusOK || len(h.upstream.Requests()) != 1 {
			t.Fatalf("HTTP %d %s, %d upstream requests; want 200, forwarded", resp.Status, resp.Body, len(h.upstream.Requests()))
		}
	}

	// Not learned yet: the upstream, which has the schema, checks.
	forwarded(t, call(t, "", tok, "us"))
	list2026(t)
	refused(t, call(t, "", tok, "us"))
	forwarded(t, call(t, "", tok, "eu"))

	// Other Hosts reach the same site and the same bindings.
	for _, host := range []string{"foo.test:" + port, "localhost:" + port, "127.0.0.1.:" + port} {
		t.Run("Host "+host, func(t *testing.T) {
			name, _, _ := strings.Cut(host, ":")
			hostTok := w.jwt(t, func(tm *vc.Template) { tm.Audience = []string{"did:web:" + name + "%3A" + port} })
			refused(t, call(t, host, hostTok, "us"))
			forwarded(t, call(t, host, hostTok, "eu"))
		})
	}

	// A 2025 list, whose answer lacks the annotation, forgets nothing.
	resp := post(t, "", tok, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("2025 tools/list: HTTP %d %s", resp.Status, resp.Body)
	}
	refused(t, call(t, "", tok, "us"))
}
