package integration

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// The official Go SDK v1.8.0 in both MCP eras through the real Caddy: a
// stateless server with the SDK's default (2026-07-28) client, and a
// stateful server with a 2025-11-25 client.

const (
	path2026 = "/mcp26" // stateless: the 2026 era
	path2025 = "/mcp25" // stateful: initialize and sessions

	foreignElicitURL = "https://evil.example.net/pay?x=1"
	ownElicitURL     = "https://" + mcpserver.AllowedAuthHost + "/consent?x=1"
)

// newHarness2026 serves the policy tools plus two tools that ask for a
// URL-mode elicitation (elicit_foreign, elicit_own) behind the edge with
// policyConfig and `tool elicit_*`.
func newHarness2026(t *testing.T) *harness {
	t.Helper()
	s := mcpserver.New(mcpserver.Options{CountInterval: countInterval})
	mcpserver.AddPolicyTools(s)
	for name, u := range map[string]string{"elicit_foreign": foreignElicitURL, "elicit_own": ownElicitURL} {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if len(req.Params.InputResponses) > 0 {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "elicited"}}}, nil
				}
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{"u": &mcp.ElicitParams{Mode: "url", Message: "open it", URL: u, ElicitationID: "e1"}},
					RequestState:  "upstream-state",
				}, nil
			})
	}
	mux := http.NewServeMux()
	mux.Handle(path2026, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	mux.Handle(path2025, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	rec := &recorder{next: mux}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	h.start(dir, testCaddyfile(freePort(t), filepath.Join(dir, "storage"), fmt.Sprintf(`:%d {
	bind 127.0.0.1
	mcpi {
		trust any
		%s
		tool elicit_*
	}
	reverse_proxy %s
}
`, h.port, policyConfig, up.Listener.Addr().String())))
	return h
}

// urlElicitClient declares URL-mode elicitation and records the URLs it is
// asked to open (accepting each).
type urlElicitClient struct {
	mu   sync.Mutex
	urls []string
}

func (c *urlElicitClient) options(mrtr bool) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.mu.Lock()
			c.urls = append(c.urls, req.Params.URL)
			c.mu.Unlock()
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: !mrtr},
	}
}

func (c *urlElicitClient) opened() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.urls)
}

func TestMCP2026BothEras(t *testing.T) {
	h := newHarness2026(t)
	w := newWorld(t, h)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	wantTools := []string{"count", "elicit_foreign", "elicit_own", "files_read", "greet", "link_allowed", "link_foreign", "whoami"}

	for _, era := range []struct{ name, path, version string }{
		{"2026 stateless", path2026, "2026-07-28"},
		{"2025 stateful", path2025, legacyProtocol},
	} {
		t.Run(era.name, func(t *testing.T) {
			ctx := testContext(t)
			el := &urlElicitClient{}
			cs := h.mustConnect(ctx, era.path, auth, era.version, el.options(true))
			if got := cs.InitializeResult().ProtocolVersion; got != era.version {
				t.Fatalf("negotiated %q, want %q", got, era.version)
			}

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if got := listedTools(tools); !slices.Equal(got, wantTools) {
				t.Errorf("tools/list = %v, want %v", got, wantTools)
			}
			if era.version == "2026-07-28" && tools.CacheScope != "private" {
				t.Errorf("filtered list has cacheScope %q, want private", tools.CacheScope)
			}

			h.upstream.Reset()
			greet(ctx, t, cs)

			// A denied call is a readable result, never an SDK error; a
			// client without URL elicitation gets the consent tool result.
			plain := h.mustConnect(ctx, era.path, auth, era.version, nil)
			res, err := plain.CallTool(ctx, &mcp.CallToolParams{Name: "files_write"})
			if err != nil {
				t.Fatalf("denied call: %v", err)
			}
			if a := handshakeAction(res); !res.IsError || a["_action"] != "auth_required" {
				t.Fatalf("denied call: isError %v action %v", res.IsError, a)
			}

			// An upstream's URL elicitation on a foreign host never reaches
			// the client; one on an allowed host does.
			callCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
			res, err = cs.CallTool(callCtx, &mcp.CallToolParams{Name: "elicit_foreign"})
			cancel()
			if slices.ContainsFunc(el.opened(), func(u string) bool { return strings.Contains(u, "evil.example.net") }) {
				t.Fatalf("the client was sent to %v", el.opened())
			}
			if era.version == "2026-07-28" && (err != nil || !res.IsError || !strings.Contains(textOf(res), "foreign_host")) {
				t.Errorf("elicit_foreign: %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit_own"})
			if err != nil || res.IsError || textOf(res) != "elicited" {
				t.Fatalf("elicit_own: %v %+v", err, res)
			}
			if got := el.opened(); len(got) != 1 || !strings.HasPrefix(got[0], ownElicitURL) || !strings.Contains(got[0], "context_did=") {
				t.Errorf("opened %v, want %s with context_did", got, ownElicitURL)
			}
		})
	}

	t.Run("2026 consent as input_required", func(t *testing.T) {
		ctx := testContext(t)
		el := &urlElicitClient{}
		cs := h.mustConnect(ctx, path2026, auth, "2026-07-28", el.options(false))
		h.upstream.Reset()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "files_write"})
		if err != nil || !res.NeedsInput() || !strings.HasPrefix(res.RequestState, "mcpi1.") {
			t.Fatalf("want input_required with the edge's requestState: %v %+v", err, res)
		}
		ep, ok := res.InputRequests["mcpi-consent"].(*mcp.ElicitParams)
		if !ok || ep.Mode != "url" || !strings.HasPrefix(ep.URL, "https://consent.example.test/approve?") || !strings.Contains(ep.URL, "tool=files_write") {
			t.Fatalf("input request %#v", res.InputRequests)
		}
		// A forged requestState is refused clearly, and nothing is forwarded.
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "files_write", RequestState: "mcpi1.forged"})
		if err == nil || !strings.Contains(err.Error(), "not one this edge issued") {
			t.Errorf("forged requestState: %v", err)
		}
		if calls := calledTools(h.upstream.Requests()); len(calls) != 0 {
			t.Errorf("upstream saw %v", calls)
		}
	})

	t.Run("header mismatch", func(t *testing.T) {
		ctx := testContext(t)
		meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
		for _, c := range []struct{ name, method, hMethod, hName, bodyName string }{
			{"name header echo, body admin_reset", "tools/call", "tools/call", "greet", "admin_reset"},
			{"name header admin_reset, body greet", "tools/call", "tools/call", "admin_reset", "greet"},
			{"method header tools/list, body tools/call", "tools/call", "tools/list", "greet", "greet"},
			{"method header tools/call, body tools/list", "tools/list", "tools/call", "", ""},
		} {
			h.upstream.Reset()
			params := map[string]any{"_meta": meta}
			if c.bodyName != "" {
				params["name"] = c.bodyName
			}
			hdr := http.Header{"Authorization": auth["Authorization"], "Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {c.hMethod}}
			if c.hName != "" {
				hdr["Mcp-Name"] = []string{c.hName}
			}
			resp := h.post(ctx, path2026, hdr, "", map[string]any{"jsonrpc": "2.0", "id": 9, "method": c.method, "params": params})
			if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), "-32020") {
				t.Errorf("%s: HTTP %d %s, want 400 -32020", c.name, resp.Status, resp.Body)
			}
			if n := len(h.upstream.Requests()); n != 0 {
				t.Errorf("%s: upstream saw %d requests", c.name, n)
			}
		}
	})
}

// textOf is the text of a tool result's first content block.
func textOf(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}
