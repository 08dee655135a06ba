package rules

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkEval is the cost of one rule on the hot path, in ns per
// evaluation, the arguments' check and reading included.
func BenchmarkEval(b *testing.B) {
	// A call whose arguments carry more than the rule reads: a note and
	// a list of line items.
	large := json.RawMessage(`{"to": "acct-1", "note": "` + strings.Repeat("x", 512) + `", "items": [` +
		strings.Repeat(`{"sku": "a-1", "qty": 2, "price": 9.5},`, 20) + `{"sku": "a-1", "qty": 2, "price": 9.5}], "amount": 120}`)
	for _, bc := range []struct {
		name, expr string
		args       json.RawMessage
	}{
		{"caller", "agent.reputation >= 80 && 'pay:execute' in delegation.scopes", nil},
		{"bounded", "arguments.amount <= 500 && agent.reputation >= 80.0", json.RawMessage(`{"amount": 120, "to": "acct-1"}`)},
		{"arguments", "arguments.amount <= delegation.constraints.max_amount", json.RawMessage(`{"amount": 120, "to": "acct-1"}`)},
		{"arguments_large", "arguments.amount <= delegation.constraints.max_amount", large},
		// A comprehension: the evaluation runs under EvalTimeout.
		{"walk", "size(arguments) <= 4 && delegation.scopes.exists(s, s == 'pay:execute')", json.RawMessage(`{"amount": 120, "to": "acct-1"}`)},
	} {
		r, err := Compile("bench", bc.expr, "")
		if err != nil {
			b.Fatal(err)
		}
		agent := map[string]any{"did": "did:key:agent", "reputation": 85.0}
		deleg := map[string]any{"scopes": []string{"pay:execute"}, "constraints": map[string]any{"max_amount": int64(500)}}
		args := bc.args
		now := time.Now()
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				in := Input{Agent: agent, Delegation: deleg, Arguments: args, Now: now}
				if ok, err := r.Eval(&in); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

// BenchmarkWalkList: a rule that walks a list of the arguments, at sizes
// up to the longest a rule reads (MaxArgumentsList), under the production
// cost limit and timeout.
func BenchmarkWalkList(b *testing.B) {
	r, err := Compile("r", "arguments.items.all(i, i <= 100)", "")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10, 100, MaxArgumentsList} {
		args := json.RawMessage(`{"items": [` + strings.Repeat(`1,`, n-1) + `1]}`)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				if ok, err := r.Eval(&Input{Arguments: args}); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
