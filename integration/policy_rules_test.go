package integration

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// rulesConfig: an argument rule on count, a delegation rule that hides
// whoami from delegations without "beta", a rule that cannot be evaluated
// on files_*, and a route-wide rule that keeps every link_* tool out.
const rulesConfig = "tool greet {\n\t\t\tscopes greet:execute\n\t\t}\n" +
	"\t\ttool count {\n\t\t\trule small_counts `arguments.n <= 3` \"Counting is limited to 3.\"\n\t\t}\n" +
	"\t\ttool whoami {\n\t\t\trule beta_only `'beta' in delegation.scopes` \"whoami is in beta.\"\n\t\t}\n" +
	"\t\ttool files_* {\n\t\t\trule broken `delegation.nope == 1`\n\t\t}\n" +
	"\t\ttool link_*\n" +
	"\t\trule no_links `!tool.name.startsWith('link_')` \"Links are off on this route.\""

// TestPolicyRulesSDK: operator rules through the real Caddy binary, with
// the Go SDK client: an argument rule admits and refuses as written, a
// delegation rule hides a tool from one delegation and shows it to another,
// a route-wide rule refuses and hides, and a rule that cannot be evaluated
// refuses. No refused call reaches the upstream.
func TestPolicyRulesSDK(t *testing.T) {
	h := newPolicyHarness(t, rulesConfig)
	w := newWorld(t, h)
	beta := http.Header{"Authorization": {"Bearer " + w.jwt(t, func(tm *vc.Template) { tm.Scopes = append(tm.Scopes, "beta") })}}
	plain := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	ctx := testContext(t)

	cs := h.mustConnect(ctx, mcpserver.Path, beta, legacyProtocol, nil)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// files_read: its rule errs at list time too, so it is hidden; the
	// link_* tools: the route-wide rule.
	if got, want := listedTools(tools), []string{"count", "greet", "whoami"}; !slices.Equal(got, want) {
		t.Errorf("beta delegation lists %v, want %v", got, want)
	}
	h.upstream.Reset()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 3}}); err != nil || res.IsError {
		t.Fatalf("count to 3: %v %+v", err, res)
	}
	refused := func(cs *mcp.ClientSession, name string, args map[string]any, wantErr, wantRule, wantText string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sc, _ := res.StructuredContent.(map[string]any)
		text := ""
		if len(res.Content) == 1 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		if !res.IsError || sc["error"] != wantErr || sc["rule"] != wantRule || !strings.Contains(text, wantText) {
			t.Errorf("%s: isError=%t %v %q, want %s by %s saying %q", name, res.IsError, sc, text, wantErr, wantRule, wantText)
		}
	}
	refused(cs, "count", map[string]any{"n": 4}, "rule_denied", "small_counts", "Counting is limited to 3.")
	refused(cs, "link_allowed", nil, "rule_denied", "no_links", "Links are off on this route.")
	refused(cs, "files_read", nil, "policy_error", "broken", "could not be evaluated")
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"}); err != nil || res.IsError {
		t.Fatalf("whoami with beta: %v %+v", err, res)
	}

	cs2 := h.mustConnect(ctx, mcpserver.Path, plain, legacyProtocol, nil)
	tools, err = cs2.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := listedTools(tools); slices.Contains(got, "whoami") || !slices.Contains(got, "greet") {
		t.Errorf("a delegation without beta lists %v, want greet and not whoami", got)
	}
	refused(cs2, "whoami", nil, "rule_denied", "beta_only", "whoami is in beta.")

	if called, want := calledTools(h.upstream.Requests()), []string{"count", "whoami"}; !slices.Equal(called, want) {
		t.Errorf("upstream ran %v, want %v", called, want)
	}
}
