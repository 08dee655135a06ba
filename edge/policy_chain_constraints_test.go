package edge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/authzen"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestRulesReadTheRootsConstraints: an agent holding a credential the
// user capped at 100 re-delegates to itself with another cap. Nothing in
// the chain check narrows an issuer's own members, so delegation.constraints
// is the root's (what the user granted): a wider child cap does not lift
// it. delegation.chain lists every link, so a rule can hold the call to a
// narrower child cap too; the PDP is sent both.
func TestRulesReadTheRootsConstraints(t *testing.T) {
	f := newFixture(t)
	pdp := newTestPDP(t)
	h, _ := obsHandler(t, nil, f, func(c *setup) {
		c.Tools = []ToolPolicy{
			{Name: "transfer", Rules: []RuleConfig{{Name: "delegated_cap",
				Expression: "has(delegation.constraints.maxAmount) && arguments.amount <= delegation.constraints.maxAmount",
				Message:    "Transfers are limited to what the user delegated."}}},
			{Name: "pay", Rules: []RuleConfig{{Name: "every_link_cap",
				Expression: "delegation.chain.all(l, !has(l.constraints.maxAmount) || arguments.amount <= l.constraints.maxAmount)",
				Message:    "Payments are limited by every delegation of the chain."}}},
		}
		c.AuthZEN = &authzen.Config{URL: pdp.URL, AllowPrivate: true}
	})
	rootID := "urn:uuid:" + randomID(t)
	root := issueAs(t, f.user, f.template(func(tm *vc.Template) {
		tm.ID = rootID
		tm.Constraints = map[string]any{"maxAmount": 100}
	}), nil)
	// child is the agent's own credential for itself, below root.
	child := func(maxAmount int) string {
		return issueAs(t, f.agent, f.template(func(tm *vc.Template) {
			tm.ID = "urn:uuid:" + randomID(t)
			tm.Constraints = map[string]any{"maxAmount": maxAmount}
		}), func(_, cred map[string]any) { setDelegation(cred, "parentId", strings.TrimPrefix(rootID, "urn:uuid:")) })
	}
	wider, narrower := child(1000000), child(10)
	for _, tc := range []struct {
		name, tok, tool, args, refusal string
	}{
		{"a wider child cap does not lift the user's", wider, "transfer", `{"amount": 5000}`, "what the user delegated"},
		{"within the user's cap under a wider child", wider, "transfer", `{"amount": 50}`, ""},
		{"the user's cap holds under a narrower child", narrower, "transfer", `{"amount": 50}`, ""},
		{"every link's cap: the narrower child refuses", narrower, "pay", `{"amount": 50}`, "every delegation of the chain"},
		{"every link's cap: within the narrower child", narrower, "pay", `{"amount": 10}`, ""},
		{"every link's cap: the root refuses under a wider child", wider, "pay", `{"amount": 101}`, "every delegation of the chain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := polPost(rulesCall(1, tc.tool, tc.args), tc.tok)
			r.Header.Set("KYA-OS-Delegation-Chain", root)
			res := polServe(t, h, r, nil)
			if res.called != (tc.refusal == "") {
				t.Fatalf("forwarded %t: HTTP %d %s", res.called, res.rec.Code, res.rec.Body)
			}
			if tc.refusal != "" && (res.rec.Code != http.StatusOK || !strings.Contains(res.rec.Body.String(), tc.refusal)) {
				t.Fatalf("HTTP %d %s", res.rec.Code, res.rec.Body)
			}
		})
	}

	// The PDP decides on the same: the root's constraints, and the chain.
	r := polPost(rulesCall(1, "transfer", `{"amount": 50}`), wider)
	r.Header.Set("KYA-OS-Delegation-Chain", root)
	if res := polServe(t, h, r, nil); !res.called {
		t.Fatalf("HTTP %d %s", res.rec.Code, res.rec.Body)
	}
	ctx, _ := pdp.lastRequest()["context"].(map[string]any)
	deleg, _ := ctx["delegation"].(map[string]any)
	cons, _ := deleg["constraints"].(map[string]any)
	chain, _ := deleg["chain"].([]any)
	if cons["maxAmount"] != float64(100) || len(chain) != 2 {
		t.Fatalf("the PDP got delegation %v, want the root's constraints and a chain of 2", deleg)
	}
	first, _ := chain[0].(map[string]any)
	last, _ := chain[1].(map[string]any)
	firstCons, _ := first["constraints"].(map[string]any)
	lastCons, _ := last["constraints"].(map[string]any)
	if first["id"] != rootID || firstCons["maxAmount"] != float64(100) || lastCons["maxAmount"] != float64(1000000) {
		t.Fatalf("the PDP got chain %v, want root first with each link's constraints", chain)
	}
}
