package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// policyJSONPath is where newPolicyHarness's upstream answers POSTs with
// application/json instead of an SSE stream.
const policyJSONPath = "/mcp-json"

// newPolicyHarness starts the demo MCP server with the policy tools (at
// mcpserver.Path answering with SSE streams, at policyJSONPath with JSON
// bodies) and Caddy in front of it, with one route:
//
//	mcpi {
//		trust any
//		<policy>
//	}
//	reverse_proxy <upstream>
func newPolicyHarness(t *testing.T, policy string) *harness {
	t.Helper()
	s := mcpserver.New(mcpserver.Options{CountInterval: countInterval})
	mcpserver.AddPolicyTools(s)
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	mux.Handle(policyJSONPath, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{JSONResponse: true}))
	return startPolicyEdge(t, mux, policy)
}

// startPolicyEdge records upstream, serves it, and runs Caddy in front of it
// with one route: mcpi (trust any, then the lines of policy) and
// reverse_proxy.
func startPolicyEdge(t *testing.T, upstream http.Handler, policy string) *harness {
	t.Helper()
	rec := &recorder{next: upstream}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	caddyfile := testCaddyfile(freePort(t), filepath.Join(dir, "storage"), fmt.Sprintf(`:%d {
	bind 127.0.0.1
	mcpi {
		trust any
		%s
	}
	reverse_proxy %s
}
`, h.port, policy, up.Listener.Addr().String()))
	h.start(dir, caddyfile)
	return h
}

// listedTools returns the sorted tool names of a tools/list answer.
func listedTools(res *mcp.ListToolsResult) []string {
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// handshakeAction returns structuredContent._meta.handshakeAction of a tool
// result, or nil.
func handshakeAction(res *mcp.CallToolResult) map[string]any {
	sc, _ := res.StructuredContent.(map[string]any)
	meta, _ := sc["_meta"].(map[string]any)
	a, _ := meta["handshakeAction"].(map[string]any)
	return a
}

// calledTools returns the names of the tools/call requests the upstream
// received.
func calledTools(reqs []record) []string {
	var out []string
	for _, m := range rpcRequests(reqs) {
		if m.Method == "tools/call" {
			out = append(out, m.Params.Name)
		}
	}
	return out
}

type rpcRequest struct {
	Method string `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

// rpcRequests decodes the single JSON-RPC messages POSTed upstream.
func rpcRequests(reqs []record) []rpcRequest {
	var out []rpcRequest
	for _, r := range reqs {
		if r.Method != http.MethodPost {
			continue
		}
		var m rpcRequest
		if json.Unmarshal(r.Body, &m) == nil && m.Method != "" {
			out = append(out, m)
		}
	}
	return out
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
