package rules

import (
	"encoding/json"
	"testing"
)

// countingVars builds each variable as a fixed map and counts the builds.
type countingVars map[string]int

func (c countingVars) Var(in *Input, name string) map[string]any {
	c[name]++
	switch name {
	case VarDelegation:
		return map[string]any{"scopes": []string{"pay:execute"}}
	case VarTool:
		return map[string]any{"name": in.ToolName}
	}
	return nil
}

// A rule builds only the variables it reads, each once however often it
// names it; one it does not read is never built.
func TestInputVarsBuiltOnRead(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want map[string]int
	}{
		{"arguments.amount <= 100", map[string]int{}},
		{"'pay:execute' in delegation.scopes && size(delegation.scopes) == 1", map[string]int{VarDelegation: 1}},
		{"tool.name == 'pay' && !has(agent.did)", map[string]int{VarTool: 1, VarAgent: 1}},
	} {
		r, err := Compile("r", tc.expr, "")
		if err != nil {
			t.Fatal(err)
		}
		got := countingVars{}
		in := Input{Vars: got, ToolName: "pay", Arguments: json.RawMessage(`{"amount": 5}`)}
		if ok, err := r.Eval(&in); err != nil || !ok {
			t.Fatalf("%s: %v %v, want true", tc.expr, ok, err)
		}
		for _, name := range []string{VarAgent, VarUser, VarDelegation, VarTool, VarRequest} {
			if got[name] != tc.want[name] {
				t.Errorf("%s: %s built %d times, want %d", tc.expr, name, got[name], tc.want[name])
			}
		}
	}
}

// A variable set on the Input is read as it is, not built.
func TestInputVarsGivenNotBuilt(t *testing.T) {
	r, err := Compile("r", "delegation.id == 'd1'", "")
	if err != nil {
		t.Fatal(err)
	}
	got := countingVars{}
	in := Input{Vars: got, Delegation: map[string]any{"id": "d1"}}
	if ok, err := r.Eval(&in); err != nil || !ok || got[VarDelegation] != 0 {
		t.Fatalf("got %v %v, %d builds; want true, none", ok, err, got[VarDelegation])
	}
}
