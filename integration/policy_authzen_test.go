package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// TestAuthZENSDK: an AuthZEN PDP decides tools/call through the real Caddy
// binary, with the Go SDK client: it allows, denies with its reason, does
// not answer in time (refused), and its cached decision is reused. No
// refused call reaches the upstream. The PDP answers only the edge's
// bearer token, taken from the environment.
func TestAuthZENSDK(t *testing.T) {
	t.Setenv("H27_PDP_TOKEN", "pdp-secret-1")
	var asked atomic.Int32
	pdp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if r.Header.Get("Authorization") != "Bearer pdp-secret-1" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var req struct {
			Subject  struct{ Type, ID string }
			Resource struct{ Type, ID string }
			Context  struct {
				Arguments map[string]any `json:"arguments"`
			}
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil || req.Subject.Type != "agent" || !strings.HasPrefix(req.Subject.ID, "did:") {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch n, _ := req.Context.Arguments["n"].(float64); {
		case req.Resource.ID == "whoami":
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		case req.Resource.ID == "count" && n > 3:
			_, _ = io.WriteString(w, `{"decision":false,"context":{"reason_user":{"en":"The PDP caps counting at 3."}}}`)
		default:
			_, _ = io.WriteString(w, `{"decision":true}`)
		}
	}))
	t.Cleanup(pdp.Close)
	h := newPolicyHarness(t, fmt.Sprintf("authzen %s {\n\t\t\tbearer {env.H27_PDP_TOKEN}\n\t\t\ttimeout 300ms\n\t\t\tcache_ttl 1m\n\t\t\tallow_private\n\t\t}", pdp.URL))
	w := newWorld(t, h)
	ctx := testContext(t)
	cs := h.mustConnect(ctx, mcpserver.Path, http.Header{"Authorization": {"Bearer " + w.jwt(t)}}, legacyProtocol, nil)
	h.upstream.Reset()

	for range 2 {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 2}}); err != nil || res.IsError {
			t.Fatalf("count to 2: %v %+v", err, res)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the PDP was asked %d times for two identical calls, want 1 (cache_ttl)", n)
	}
	refused := func(name string, args map[string]any, wantErr, wantText string) {
		t.Helper()
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("%s took %s: the PDP timeout did not hold", name, time.Since(start))
		}
		sc, _ := res.StructuredContent.(map[string]any)
		text := ""
		if len(res.Content) == 1 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		if !res.IsError || sc["error"] != wantErr || sc["rule"] != "authzen" || !strings.Contains(text, wantText) {
			t.Errorf("%s: isError=%t %v %q, want %s by authzen saying %q", name, res.IsError, sc, text, wantErr, wantText)
		}
	}
	refused("count", map[string]any{"n": 5}, "rule_denied", "The PDP caps counting at 3.")
	refused("whoami", nil, "policy_error", "gave no decision")

	if called, want := calledTools(h.upstream.Requests()), []string{"count", "count"}; !slices.Equal(called, want) {
		t.Errorf("upstream ran %v, want %v", called, want)
	}
	if strings.Contains(h.output.String(), "pdp-secret-1") {
		t.Error("Caddy's output holds the PDP's token")
	}
}
