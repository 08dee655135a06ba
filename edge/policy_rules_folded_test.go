package edge

import (
	"strings"
	"testing"
)

// TestRuleRefusesAFoldedMember: {"TO": "mallory"} has no member "to" for
// a rule, but a Go upstream (encoding/json folds case) reads it as "to":
// the edge refuses the call instead of letting the rule pass it.
func TestRuleRefusesAFoldedMember(t *testing.T) {
	f := newFixture(t)
	h, _ := obsHandler(t, nil, f, func(c *setup) {
		c.Tools = []ToolPolicy{{Name: "send", Rules: []RuleConfig{{Name: "alice_only",
			Expression: `!has(arguments.to) || arguments.to == "alice"`}}}}
	})
	tok := f.jwt(t, nil)
	for args, forwarded := range map[string]bool{
		`{"to": "alice"}`:            true,
		`{"body": "hi"}`:             true,
		`{"to": "mallory"}`:          false,
		`{"TO": "mallory"}`:          false,
		"{\"t\u212a\": \"mallory\"}": true, // folds to "tk", not "to"
		`{"\u0074O": "mallory"}`:     false,
	} {
		res := polServe(t, h, polPost(rulesCall(1, "send", args), tok), nil)
		if res.called != forwarded {
			t.Errorf("%s: forwarded %t, want %t: %s", args, res.called, forwarded, res.rec.Body)
		}
		if !forwarded && strings.Contains(args, "O") && !strings.Contains(res.rec.Body.String(), "policy_error") {
			t.Errorf("%s: %s, want a policy_error", args, res.rec.Body)
		}
	}
}
