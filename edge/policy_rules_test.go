package edge

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// rulesCall is a tools/call of tool with the JSON arguments args.
func rulesCall(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// rulesListReply answers a tools/list with the tools named.
func rulesListReply(names ...string) func(w http.ResponseWriter, r *http.Request) {
	var tools []string
	for _, n := range names {
		tools = append(tools, fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object"}}`, n))
	}
	body := `{"jsonrpc":"2.0","id":2,"result":{"tools":[` + strings.Join(tools, ",") + `]}}`
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

func listed(t *testing.T, res polResult) []string {
	t.Helper()
	m := decodeRPC(t, res.rec.Body.Bytes())
	if m.Result == nil {
		t.Fatalf("tools/list answer %s", res.rec.Body)
	}
	var names []string
	for _, tl := range m.Result.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func TestRulesDecideToolCalls(t *testing.T) {
	f := newFixture(t)
	var logged []string
	h, logs := obsHandler(t, nil, f, func(c *setup) {
		c.Tools = []ToolPolicy{
			{Name: "transfer", Scopes: []string{"echo:execute"}, Rules: []RuleConfig{
				{Name: "amount_cap", Expression: "arguments.amount <= 100", Message: "Transfers are limited to 100."}}},
			{Name: "lookup", Rules: []RuleConfig{
				{Name: "needs_region", Expression: "arguments.region == 'eu'"}}},
			{Name: "broken", Rules: []RuleConfig{
				{Name: "typo", Expression: "delegation.constraint.max >= 1"}}},
			{Name: "echo"},
		}
		c.Rules = []RuleConfig{{Name: "not_on_admin_path", Expression: "request.path != '/admin'", Message: "Not here."}}
	})
	tok := f.jwt(t, nil)
	for _, tc := range []struct {
		name, body, path string
		forwarded        bool
		rule, reason     string
		text             string
	}{
		{name: "within the cap", body: rulesCall(1, "transfer", `{"amount": 100, "to": "acct-9"}`), forwarded: true},
		{name: "over the cap", body: rulesCall(1, "transfer", `{"amount": 250, "to": "acct-9"}`),
			rule: "amount_cap", reason: "rule_denied", text: "Transfers are limited to 100."},
		{name: "no message", body: rulesCall(1, "lookup", `{"region": "us"}`),
			rule: "needs_region", reason: "rule_denied", text: "does not allow it"},
		{name: "evaluation error fails closed", body: rulesCall(1, "broken", `{}`),
			rule: "typo", reason: "policy_error", text: "could not be evaluated"},
		{name: "route-wide rule", body: rulesCall(1, "echo", `{}`), path: "/admin",
			rule: "not_on_admin_path", reason: "rule_denied", text: "Not here."},
		{name: "route-wide rule holds", body: rulesCall(1, "echo", `{}`), forwarded: true},
		{name: "batch decided per message", body: "[" + rulesCall(1, "transfer", `{"amount": 1}`) + "," + rulesCall(2, "transfer", `{"amount": 1000}`) + "]",
			rule: "amount_cap", reason: "rule_denied", text: "Transfers are limited to 100."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := polPost(tc.body, tok)
			if tc.path != "" {
				r.URL.Path = tc.path
			}
			res := polServe(t, h, r, nil)
			if res.called != tc.forwarded {
				t.Fatalf("forwarded %t, want %t: HTTP %d %s", res.called, tc.forwarded, res.rec.Code, res.rec.Body)
			}
			if tc.forwarded {
				return
			}
			body := res.rec.Body.String()
			if res.rec.Code != http.StatusOK || !strings.Contains(body, tc.text) ||
				!strings.Contains(body, `"error":"`+tc.reason+`"`) || !strings.Contains(body, `"rule":"`+tc.rule+`"`) {
				t.Fatalf("HTTP %d %s; want the %s denial of %s saying %q", res.rec.Code, body, tc.reason, tc.rule, tc.text)
			}
			if strings.Contains(body, "250") || strings.Contains(body, "acct-9") {
				t.Errorf("the denial repeats the arguments: %s", body)
			}
			entries := auditLogs(t, h, logs).All()
			e := entries[len(entries)-1].ContextMap()
			if e["outcome"] != "denied" || e["reason"] != tc.reason || e["rule"] != tc.rule {
				t.Errorf("audit entry %v, want denied %s naming %s", e, tc.reason, tc.rule)
			}
			logged = nil
			for _, le := range logs.All() {
				for _, v := range le.ContextMap() {
					if s, ok := v.(string); ok && (strings.Contains(s, "250") || strings.Contains(s, "acct-9")) {
						logged = append(logged, s)
					}
				}
			}
			if len(logged) > 0 {
				t.Errorf("logs hold argument values: %q", logged)
			}
		})
	}
	// Arguments an upstream could read otherwise than the rule did never
	// reach it.
	if res := polServe(t, h, polPost(rulesCall(1, "transfer", `{"amount": 5, "Amount": 250}`), tok), nil); res.called {
		t.Error("a repeated argument member was forwarded")
	}
	// A broken rule is logged once, however many calls it refuses.
	polServe(t, h, polPost(rulesCall(1, "broken", `{}`), tok), nil)
	if n := len(logs.FilterMessageSnippet("could not be evaluated").FilterField(zap.String("rule", "typo")).All()); n != 1 {
		t.Errorf("the broken rule was logged %d times, want once", n)
	}
}

func TestRulesFilterToolsList(t *testing.T) {
	f := newFixture(t)
	other := newParty(t)
	h := f.l2Handler(t, nil, func(c *setup) {
		c.Reputation = &ReputationConfig{Scores: map[string]float64{f.agent.did: 90, other.did: 40}}
		c.Tools = []ToolPolicy{
			{Name: "transfer", Rules: []RuleConfig{{Name: "trusted_agents", Expression: "agent.reputation >= 80 && arguments.amount <= 100"}}},
			{Name: "search"},
		}
	})
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	trusted := f.jwt(t, nil)
	untrusted := f.jwt(t, func(tm *vc.Template) { tm.AgentDID = other.did })

	if got := listed(t, polServe(t, h, polPost(list, trusted), rulesListReply("transfer", "search"))); !slices.Equal(got, []string{"transfer", "search"}) {
		t.Errorf("the trusted agent is listed %v, want transfer and search (the amount is decided on the call)", got)
	}
	if got := listed(t, polServe(t, h, polPost(list, untrusted), rulesListReply("transfer", "search"))); !slices.Equal(got, []string{"search"}) {
		t.Errorf("the agent of reputation 40 is listed %v, want search alone", got)
	}
	res := polServe(t, h, polPost(rulesCall(1, "transfer", `{"amount": 5}`), untrusted), nil)
	if res.called || !strings.Contains(res.rec.Body.String(), `"rule":"trusted_agents"`) {
		t.Errorf("the hidden tool was called by the agent it is hidden from: HTTP %d %s", res.rec.Code, res.rec.Body)
	}
	if res := polServe(t, h, polPost(rulesCall(1, "transfer", `{"amount": 5}`), trusted), nil); !res.called {
		t.Errorf("the trusted agent was refused: %s", res.rec.Body)
	}
}

func TestRulesRefusedAtProvision(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*setup)
		want string
	}{
		{"syntax", func(c *setup) {
			c.Tools = []ToolPolicy{{Name: "t", Rules: []RuleConfig{{Name: "r", Expression: "arguments.amount <="}}}}
		}, `tool "t": rule "r": line 1, column 20 of the expression`},
		{"route-wide type error", func(c *setup) { c.Rules = []RuleConfig{{Name: "r", Expression: "now > 1"}} }, `rules: rule "r": line 1, column 5`},
		{"name twice", func(c *setup) {
			c.Rules = []RuleConfig{{Name: "r", Expression: "true"}}
			c.Tools = []ToolPolicy{{Name: "t", Rules: []RuleConfig{{Name: "r", Expression: "true"}}}}
		}, "used once per route"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup{Config: Config{TrustedIssuers: []string{"*"}}}
			tc.mod(&s)
			h, err := New(s.Config, append([]Option{WithHooks(testHooks)}, s.opts...)...)
			if err == nil {
				_ = h.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRuleErrorsLogNoValues: CEL's error messages quote the values they
// failed on, which may be the call's arguments: the warning names only
// the kind of error, once per rule and kind, so a caller's own error
// neither leaks into the log nor hides another kind from the operator.
func TestRuleErrorsLogNoValues(t *testing.T) {
	f := newFixture(t)
	h, logs := obsHandler(t, nil, f, func(c *setup) {
		c.Tools = []ToolPolicy{{Name: "pick", Rules: []RuleConfig{
			{Name: "mode_ok", Expression: `{"read": true}[arguments.mode] && timestamp(arguments.at) < now`}}}}
	})
	tok := f.jwt(t, nil)
	for _, args := range []string{
		`{"mode": "SECRET-KEY-3", "at": "2026-01-01T00:00:00Z"}`,
		`{"mode": "SECRET-KEY-4", "at": "2026-01-01T00:00:00Z"}`,
		`{"mode": "read", "at": "SECRET-TS-2"}`,
	} {
		res := polServe(t, h, polPost(rulesCall(1, "pick", args), tok), nil)
		if res.called || !strings.Contains(res.rec.Body.String(), `"error":"policy_error"`) {
			t.Fatalf("forwarded %t: %s, want a policy_error", res.called, res.rec.Body)
		}
	}
	warnings := logs.FilterMessageSnippet("a tool rule could not be evaluated").All()
	if len(warnings) != 2 {
		t.Errorf("%d warnings, want one per kind of error (a missing key, a conversion): %v", len(warnings), warnings)
	}
	for _, le := range logs.All() {
		for k, v := range le.ContextMap() {
			if s, ok := v.(string); ok && strings.Contains(s, "SECRET") {
				t.Errorf("log field %s holds an argument's value: %s", k, s)
			}
		}
	}
}
