package rules

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkEval is the cost of one rule on the hot path, in ns per
// evaluation, arguments decoded included.
func BenchmarkEval(b *testing.B) {
	for _, bc := range []struct{ name, expr string }{
		{"caller", "agent.reputation >= 80 && 'pay:execute' in delegation.scopes"},
		{"arguments", "arguments.amount <= delegation.constraints.max_amount"},
	} {
		r, err := Compile("bench", bc.expr, "")
		if err != nil {
			b.Fatal(err)
		}
		agent := map[string]any{"did": "did:key:agent", "reputation": 85.0}
		deleg := map[string]any{"scopes": []string{"pay:execute"}, "constraints": map[string]any{"max_amount": int64(500)}}
		args := json.RawMessage(`{"amount": 120, "to": "acct-1"}`)
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
