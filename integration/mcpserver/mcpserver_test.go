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

// TestTools runs every tool and reads the resource directly (no edge) over
// Streamable HTTP, with both the legacy initialize handshake and the SDK's
// default protocol, from the stateful and the stateless handler (which must
// answer both eras: the demo serves it).
func TestTools(t *testing.T) {
	stateful := httptest.NewServer(Handler(Options{CountInterval: 50 * time.Millisecond}))
	defer stateful.Close()
	stateless := httptest.NewServer(Handler(Options{CountInterval: 50 * time.Millisecond, Stateless: true}))
	defer stateless.Close()

	for _, tc := range []struct {
		name, version string
		srv           *httptest.Server
	}{
		{"stateful/protocol=2025-11-25", "2025-11-25", stateful},
		{"stateful/protocol=", "", stateful},
		{"stateless/protocol=2025-11-25", "2025-11-25", stateless},
		{"stateless/protocol=2026-07-28", "2026-07-28", stateless},
	} {
		srv, version := tc.srv, tc.version
		t.Run(tc.name, func(t *testing.T) {
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

			about, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: AboutURI})
			if err != nil || len(about.Contents) != 1 || about.Contents[0].Text != AboutText {
				t.Errorf("resources/read %s: %v %+v", AboutURI, err, about)
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

// TestElicitTools: a 2026 client that supports URL-mode elicitation is asked
// to open the tool's URL (in an input_required result) and, once it
// answered, gets the tool's result on the retry.
func TestElicitTools(t *testing.T) {
	s := New(Options{})
	AddElicitTools(s)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for tool, wantURL := range map[string]string{"elicit_foreign": ForeignAuthURL, "elicit_allowed": AllowedAuthURL} {
		var asked []string
		client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = append(asked, req.Params.Mode+" "+req.Params.URL)
				return &mcp.ElicitResult{Action: "accept"}, nil
			},
		})
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool})
		cs.Close()
		if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != ElicitDoneText {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
		if want := []string{"url " + wantURL}; strings.Join(asked, ",") != strings.Join(want, ",") {
			t.Errorf("%s: client was asked %q, want %q", tool, asked, want)
		}
	}
}
