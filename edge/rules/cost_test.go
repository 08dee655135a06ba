package rules

import "testing"

// TestCostTrackerKeptUnlessBounded: only a rule whose worst case cannot
// grow with its inputs runs without the runtime cost tracker.
func TestCostTrackerKeptUnlessBounded(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		tracked bool
	}{
		{expr: "arguments.amount <= 100", tracked: false},
		{expr: "arguments.amount <= 100.0 && agent.reputation >= 80.0", tracked: false},
		// Its prefix, not the string, sets startsWith's cost.
		{expr: "arguments.text.startsWith('x')", tracked: false},
		{expr: "arguments.text.size() <= 100", tracked: false},
		{expr: "now.getDayOfWeek() in [1, 2, 3, 4, 5]", tracked: false},
		{expr: "[1, 2, 3].all(i, i > 0)", tracked: false},
		// Cost grows with an input: the tracker stays.
		{expr: "arguments.items.all(a, arguments.items.all(b, a == b || a != b))", tracked: true},
		{expr: "arguments.items.exists(i, i == 'x')", tracked: true},
		{expr: "arguments.items.map(a, arguments.items.filter(b, b == a)).size() > 0", tracked: true},
		{expr: "'pay:execute' in delegation.scopes", tracked: true},
		{expr: "arguments.owner == user.did", tracked: true},
		{expr: "arguments.text.matches('^a+$')", tracked: true},
		// Two dyn values may be strings, compared in their length.
		{expr: "arguments.amount <= delegation.constraints.max_amount", tracked: true},
		{expr: "(arguments.a + arguments.b).size() < 3", tracked: true},
		{expr: "arguments.size() >= 0 && arguments.all(k, k != 'x')", tracked: true},
	} {
		r, err := Compile("r", tc.expr, "")
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.expr, err)
		}
		if r.tracked != tc.tracked {
			t.Errorf("%s: tracked = %v, want %v", tc.expr, r.tracked, tc.tracked)
		}
	}
}
