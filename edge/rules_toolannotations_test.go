package edge

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// annotatedListReply answers a tools/list with tools, given as JSON.
func annotatedListReply(tools ...string) func(w http.ResponseWriter, r *http.Request) {
	body := `{"jsonrpc":"2.0","id":2,"result":{"tools":[` + strings.Join(tools, ",") + `]}}`
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

// TestRulesReadToolAnnotations adapts the tool.annotations example of
// docs/config/rules.md: the annotations a rule reads are those of the
// upstream's tools/list answers, at list time and on the call; a tool the
// edge has not seen listed has none, and the rule fails closed for it.
func TestRulesReadToolAnnotations(t *testing.T) {
	f := newFixture(t)
	other := newParty(t)
	h := f.l2Handler(t, nil, func(c *setup) {
		c.Reputation = &ReputationConfig{Scores: map[string]float64{f.agent.did: 90, other.did: 40}}
		c.Rules = []RuleConfig{{Name: "read_only_for_new_agents",
			Expression: "(has(tool.annotations) && has(tool.annotations.readOnlyHint) && tool.annotations.readOnlyHint) || (has(agent.reputation) && agent.reputation >= 80)",
			Message:    "Agents under 80 may only use read-only tools."}}
		c.Tools = []ToolPolicy{{Name: "*"}}
	})
	trusted := f.jwt(t, nil)
	untrusted := f.jwt(t, func(tm *vc.Template) { tm.AgentDID = other.did })

	// Before any list, the edge knows no annotations: refused, closed.
	if res := polServe(t, h, polPost(rulesCall(1, "search", `{}`), untrusted), nil); res.called ||
		!strings.Contains(res.rec.Body.String(), "Agents under 80") {
		t.Fatalf("a tool never listed was called by the new agent: HTTP %d %s", res.rec.Code, res.rec.Body)
	}

	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	reply := annotatedListReply(
		`{"name":"search","inputSchema":{"type":"object"},"annotations":{"title":"Search","readOnlyHint":true}}`,
		`{"name":"delete","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`,
		`{"name":"fake","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":"true"}}`)
	if got := listed(t, polServe(t, h, polPost(list, untrusted), reply)); !slices.Equal(got, []string{"search"}) {
		t.Errorf("the new agent is listed %v, want search alone", got)
	}
	if got := listed(t, polServe(t, h, polPost(list, trusted), reply)); !slices.Equal(got, []string{"search", "delete", "fake"}) {
		t.Errorf("the trusted agent is listed %v, want all three", got)
	}
	for _, tc := range []struct {
		tool      string
		tok       string
		forwarded bool
	}{
		{"search", untrusted, true},
		{"delete", untrusted, false},
		{"fake", untrusted, false}, // a hint of another type is not a hint
		{"delete", trusted, true},
	} {
		res := polServe(t, h, polPost(rulesCall(1, tc.tool, `{}`), tc.tok), nil)
		if res.called != tc.forwarded {
			t.Errorf("call of %s: forwarded %t, want %t: %s", tc.tool, res.called, tc.forwarded, res.rec.Body)
		}
		if !tc.forwarded && !strings.Contains(res.rec.Body.String(), `"rule":"read_only_for_new_agents"`) {
			t.Errorf("call of %s refused otherwise than by the rule: %s", tc.tool, res.rec.Body)
		}
	}
}
