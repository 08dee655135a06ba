package edge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/authzen"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestRulesReadDelegationConstraints: delegation.constraints holds the
// issuer's own limits, so a rule can cap an argument by what the user
// delegated, and the PDP is sent them.
func TestRulesReadDelegationConstraints(t *testing.T) {
	f := newFixture(t)
	pdp := newTestPDP(t)
	h, _ := obsHandler(t, nil, f, func(c *setup) {
		c.Tools = []ToolPolicy{{Name: "transfer", Rules: []RuleConfig{{Name: "delegated_cap",
			Expression: "has(delegation.constraints.maxAmount) && arguments.amount <= delegation.constraints.maxAmount",
			Message:    "Transfers are limited to what the user delegated."}}}}
		c.AuthZEN = &authzen.Config{URL: pdp.URL, AllowPrivate: true}
	})
	limited := f.jwt(t, func(tm *vc.Template) { tm.Constraints = map[string]any{"maxAmount": 50} })
	unlimited := f.jwt(t, nil)
	for _, tc := range []struct {
		name, tok, args string
		forwarded       bool
	}{
		{"within the delegated cap", limited, `{"amount": 50}`, true},
		{"over the delegated cap", limited, `{"amount": 51}`, false},
		{"no cap delegated", unlimited, `{"amount": 1}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := polServe(t, h, polPost(rulesCall(1, "transfer", tc.args), tc.tok), nil)
			if res.called != tc.forwarded {
				t.Fatalf("forwarded %t, want %t: %s", res.called, tc.forwarded, res.rec.Body)
			}
			if !tc.forwarded && (res.rec.Code != http.StatusOK || !strings.Contains(res.rec.Body.String(), "what the user delegated")) {
				t.Fatalf("HTTP %d %s", res.rec.Code, res.rec.Body)
			}
		})
	}
	ctx, _ := pdp.lastRequest()["context"].(map[string]any)
	deleg, _ := ctx["delegation"].(map[string]any)
	cons, _ := deleg["constraints"].(map[string]any)
	if cons["maxAmount"] != float64(50) {
		t.Fatalf("the PDP got delegation %v, want its constraints", deleg)
	}
}
