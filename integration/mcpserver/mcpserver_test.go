package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// headerRT adds fixed headers to every request, as the edge would after
// verification.
type headerRT struct{ h http.Header }

func (rt headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range rt.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestTools runs every tool directly (no edge) over Streamable HTTP, with
// both the legacy initialize handshake and the SDK's default protocol.
func TestTools(t *testing.T) {
	srv := httptest.NewServer(Handler(Options{CountInterval: 50 * time.Millisecond}))
	defer srv.Close()

	for _, version := range []string{"2025-11-25", ""} {
		t.Run("protocol="+version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var mu sync.Mutex
			var progress []float64
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, req.Params.Progress)
					mu.Unlock()
				},
			})
			hc := &http.Client{Transport: headerRT{http.Header{
				"X-Agent-DID":           {"did:key:agent"},
				"X-Verified-Delegation": {"1"},
			}}}
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + Path, HTTPClient: hc},
				&mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			if got := strings.Join(names, ","); got != "count,greet,whoami" {
				t.Errorf("tools = %s", got)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}})
			if err != nil || res.IsError {
				t.Fatalf("greet: %v %+v", err, res)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != "Hello, Ada" {
				t.Errorf("greet = %q", got)
			}

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
			if err != nil || res.IsError {
				t.Fatalf("whoami: %v %+v", err, res)
			}
			sc, _ := res.StructuredContent.(map[string]any)
			if sc["agent_did"] != "did:key:agent" || sc["verified_delegation"] != true || sc["user_did"] != nil {
				t.Errorf("whoami structured = %v", res.StructuredContent)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "did:key:agent") {
				t.Errorf("whoami text = %q", text)
			}

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 3}, Meta: mcp.Meta{"progressToken": "p1"}})
			if err != nil || res.IsError {
				t.Fatalf("count: %v %+v", err, res)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(progress) != 3 || progress[0] != 1 || progress[2] != 3 {
				t.Errorf("progress = %v", progress)
			}

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 0}})
			if err != nil || !res.IsError {
				t.Errorf("count n=0: want tool error, got %v %+v", err, res)
			}
		})
	}
}

func TestHealthz(t *testing.T) {
	srv := httptest.NewServer(Handler(Options{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + HealthPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
}
