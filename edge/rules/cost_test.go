package rules

import (
	"strconv"
	"testing"
)

// TestCostTrackerKeptUnlessBounded: only a rule whose worst case cannot
// grow past the cost limit runs without the runtime cost tracker.
func TestCostTrackerKeptUnlessBounded(t *testing.T) {
	scopes := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = "s" + strconv.Itoa(i)
		}
		return s
	}
	few := &Input{Delegation: map[string]any{"scopes": scopes(boundedScopes)}}
	many := &Input{Delegation: map[string]any{"scopes": scopes(boundedScopes + 1)}}
	odd := &Input{Delegation: map[string]any{"scopes": "pay:execute"}}
	for _, tc := range []struct {
		expr string
		// untracked on a delegation with few scopes, and with many.
		few, many bool
	}{
		{expr: "arguments.amount <= 100", few: true, many: true},
		{expr: "arguments.amount <= 100.0 && agent.reputation >= 80.0", few: true, many: true},
		{expr: "arguments.text.size() <= 100", few: true, many: true},
		{expr: "now.getDayOfWeek() in [1, 2, 3, 4, 5]", few: true, many: true},
		{expr: "[1, 2, 3].all(i, i > 0)", few: true, many: true},
		// Its prefix, not the string, sets startsWith's cost.
		{expr: "arguments.text.startsWith('x')", few: true, many: true},
		// Bounded by the number of scopes.
		{expr: "arguments.text.size() <= 100 && 'echo:execute' in delegation.scopes", few: true},
		{expr: "delegation.scopes.size() < 3 || 'a' in delegation.scopes", few: true},
		{expr: "arguments.text in delegation.scopes", few: true}, // `in` costs the list's size
		// Cost grows with an input: the tracker stays.
		{expr: "arguments.items.all(a, arguments.items.all(b, a == b || a != b))"},
		{expr: "arguments.items.exists(i, i == 'x')"},
		{expr: "arguments.items.map(a, arguments.items.filter(b, b == a)).size() > 0"},
		{expr: "delegation.scopes.all(a, delegation.scopes.all(b, a == b || a != b))"},
		{expr: "delegation.scopes.exists(s, s.matches(arguments.text))"},
		{expr: "arguments.owner == user.did"},
		{expr: "arguments.amount <= delegation.constraints.max_amount"}, // dyn values may be strings
		{expr: "arguments.text.matches('^a+$')"},
		{expr: "(arguments.a + arguments.b).size() < 3"},
		{expr: "arguments.size() >= 0 && arguments.all(k, k != 'x')"},
		{expr: "'x' in delegation.audience"},
	} {
		r, err := Compile("r", tc.expr, "")
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.expr, err)
		}
		untracked := func(in *Input) bool {
			p := r.program(in)
			return r.untracked != nil && p == r.untracked
		}
		if got := untracked(few); got != tc.few {
			t.Errorf("%s with %d scopes: untracked = %v, want %v", tc.expr, boundedScopes, got, tc.few)
		}
		if got := untracked(many); got != tc.many {
			t.Errorf("%s with %d scopes: untracked = %v, want %v", tc.expr, boundedScopes+1, got, tc.many)
		}
		if got := untracked(odd); got != tc.many {
			t.Errorf("%s with scopes not a list: untracked = %v, want %v", tc.expr, got, tc.many)
		}
	}
}
