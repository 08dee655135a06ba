package integration

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// TestGoSDK2026Client: the official Go SDK client at 2026-07-28 through the
// real Caddy (level 2, per-tool policy) in front of the Go SDK's stateless
// server: discover and the subscriptions/listen stream at connect, a
// filtered tools/list, an allowed call, progress, resources/read, and a
// denied call the client reads as a tool error without running the tool.
func TestGoSDK2026Client(t *testing.T) {
	h := newMCP2026Harness(t)
	w := newWorld(t, h)
	tok := w.jwt(t)
	ctx := testContext(t)

	var mu sync.Mutex
	var progress []float64
	opts := &mcp.ClientOptions{
		// A list-changed handler makes Connect open subscriptions/listen
		// and wait for the server's acknowledgement.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		},
	}
	cs := h.mustConnect(ctx, mcpserver.Path, http.Header{"Authorization": {"Bearer " + tok}}, modernProtocol, opts)
	if got := rpcMethods(h.upstream.Requests()); !slices.Contains(got, "server/discover") || !slices.Contains(got, "subscriptions/listen") || slices.Contains(got, "initialize") {
		t.Errorf("upstream saw %v at connect, want server/discover and subscriptions/listen, no initialize", got)
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	want := []string{"count", "elicit_allowed", "elicit_foreign", "files_read", "greet", "link_allowed", "link_foreign", "whoami"}
	if got := listedTools(tools); !slices.Equal(got, want) {
		t.Errorf("tools/list = %v, want %v", got, want)
	}

	h.upstream.Reset()
	greet(ctx, t, cs)
	about, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.AboutURI})
	if err != nil || len(about.Contents) != 1 || about.Contents[0].Text != mcpserver.AboutText {
		t.Errorf("resources/read: %v %+v", err, about)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 2}, Meta: mcp.Meta{"progressToken": "c1"}})
	if err != nil || res.IsError {
		t.Fatalf("count: %v %+v", err, res)
	}
	mu.Lock()
	if !slices.Equal(progress, []float64{1, 2}) {
		t.Errorf("progress %v, want [1 2]", progress)
	}
	mu.Unlock()

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "files_write", Arguments: map[string]any{"path": "/x"}})
	if err != nil {
		t.Fatalf("files_write (missing scope): %v", err)
	}
	if a := handshakeAction(res); !res.IsError || a["_action"] != "auth_required" {
		t.Errorf("files_write: isError=%t handshakeAction %v", res.IsError, a)
	}
	if got := calledTools(h.upstream.Requests()); !slices.Equal(got, []string{"greet", "count"}) {
		t.Errorf("upstream ran %v, want [greet count]", got)
	}
	assertNotForwarded(t, h.upstream.Requests(), tok)
}
