package rules

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCompileRefusesMalformedRules(t *testing.T) {
	for _, tc := range []struct {
		name, expr string
		line, col  int
		want       string
	}{
		{name: "syntax", expr: "arguments.amount <= ", line: 1, col: 21, want: "Syntax error"},
		{name: "unknown variable", expr: "agnet.reputation >= 80", line: 1, col: 1, want: "undeclared reference to 'agnet'"},
		{name: "not a bool", expr: "arguments.amount + 1", want: "must give a bool"},
		{name: "string result", expr: `"yes"`, want: "must give a bool"},
		{name: "type mismatch", expr: `now > 3`, line: 1, col: 5, want: "no matching overload"},
		{name: "unknown function", expr: `launch(tool.name)`, line: 1, col: 7, want: "undeclared reference to 'launch'"},
		{name: "second line", expr: "agent.did == \"x\" &&\n  user.did ==", line: 2, col: 14, want: "Syntax error"},
		{name: "empty", expr: "  ", want: "expression is empty"},
		{name: "too long", expr: strings.Repeat("true && ", MaxExpressionSize/8+1) + "true", want: "size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile("r1", tc.expr, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile(%q) = %v, want an error with %q", tc.expr, err, tc.want)
			}
			var ce *CompileError
			if tc.line != 0 {
				if !errors.As(err, &ce) || ce.Line != tc.line || ce.Column != tc.col {
					t.Fatalf("Compile(%q) = %#v, want line %d column %d", tc.expr, err, tc.line, tc.col)
				}
			}
		})
	}
	if _, err := Compile("", "true", ""); err == nil {
		t.Fatal("a rule without a name compiled")
	}
}

func TestEval(t *testing.T) {
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC) // a Wednesday
	in := func(args string) *Input {
		return &Input{
			Agent:      map[string]any{"did": "did:key:agent", "reputation": 85.5},
			User:       map[string]any{"did": "did:key:user"},
			Delegation: map[string]any{"scopes": []string{"pay:execute"}, "constraints": map[string]any{"max_amount": int64(500)}},
			Tool:       map[string]any{"name": "transfer"},
			Request:    map[string]any{"method": "tools/call"},
			Arguments:  json.RawMessage(args),
			Now:        now,
		}
	}
	for _, tc := range []struct {
		expr, args string
		want       bool
		err        string
	}{
		{expr: "arguments.amount <= 100", args: `{"amount": 100}`, want: true},
		{expr: "arguments.amount <= 100", args: `{"amount": 100.5}`, want: false},
		{expr: "arguments.amount <= 100", args: `{"amount": 1e400}`, err: "out of range"},
		{expr: "arguments.amount <= 100", args: `{"amount": 5, "Amount": 500}`, err: "cannot be read"},
		{expr: "arguments.amount <= 100", args: `{"a": {"amount": 5, "amount": 500}}`, err: "cannot be read"},
		{expr: "arguments.amount <= 100", args: `[1]`, err: "not a JSON object"},
		{expr: "arguments.amount <= 100", args: `{}`, err: "no such key"},
		{expr: "arguments.amount <= 100", args: ``, err: "no such key"},
		{expr: "!has(arguments.amount) || arguments.amount <= 100", args: `null`, want: true},
		{expr: "arguments.amount <= delegation.constraints.max_amount", args: `{"amount": 499}`, want: true},
		{expr: "arguments.amount <= delegation.constraints.max_amount", args: `{"amount": 501}`, want: false},
		{expr: "agent.reputation >= 80.0", want: true},
		{expr: "agent.reputation >= 90", want: false},
		{expr: "has(agent.level) && agent.level > 1", want: false},
		{expr: "'pay:execute' in delegation.scopes", want: true},
		{expr: "now.getDayOfWeek() in [1, 2, 3, 4, 5]", want: true},
		{expr: "arguments.owner == user.did", args: `{"owner": "did:key:user"}`, want: true},
		{expr: "arguments.owner == user.did", args: `{"owner": "did:key:other"}`, want: false},
		{expr: "request.method == 'tools/call' && tool.name == 'transfer'", want: true},
		{expr: "1 / (arguments.n - arguments.n) == 1", args: `{"n": 3}`, err: "division by zero"},
		{expr: "arguments.items.all(i, i.size() < 10)", args: `{"items": ["a", "b"]}`, want: true},
	} {
		r, err := Compile("r", tc.expr, "")
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.expr, err)
		}
		got, err := r.Eval(in(tc.args))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s with %s = %v, %v; want an error with %q", tc.expr, tc.args, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s with %s = %v, %v; want %v", tc.expr, tc.args, got, err, tc.want)
		}
	}
}

func TestEvalListing(t *testing.T) {
	in := &Input{Agent: map[string]any{"reputation": int64(50)}, User: map[string]any{"did": "did:key:u"}}
	for _, tc := range []struct {
		expr string
		want bool
	}{
		// Depends on the arguments alone: listed, decided on the call.
		{expr: "arguments.amount <= 100", want: true},
		// Cannot hold for this caller whatever the arguments: hidden.
		{expr: "agent.reputation >= 80 && arguments.amount <= 100", want: false},
		{expr: "agent.reputation >= 80", want: false},
		{expr: "agent.reputation >= 40 && arguments.owner == user.did", want: true},
		{expr: "agent.reputation >= 40 || arguments.amount < 1", want: true},
	} {
		r, err := Compile("r", tc.expr, "")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := r.EvalListing(in); err != nil || got != tc.want {
			t.Errorf("EvalListing(%s) = %v, %v; want %v", tc.expr, got, err, tc.want)
		}
	}
}

func TestCostLimitStopsHostileArguments(t *testing.T) {
	r, err := Compile("r", "arguments.items.all(a, arguments.items.all(b, a == b || a != b))", "")
	if err != nil {
		t.Fatal(err)
	}
	items := strings.Repeat(`"x",`, MaxArgumentsList-1) + `"x"`
	_, err = r.Eval(&Input{Arguments: json.RawMessage(`{"items": [` + items + `]}`)})
	if err == nil || !(strings.Contains(err.Error(), "cost limit") || strings.Contains(err.Error(), "interrupted")) {
		t.Fatalf("a quadratic rule over %d items = %v, want the cost or time limit", MaxArgumentsList, err)
	}
}

// TestRuleWalksBoundedInTime: a rule that walks a list, the longest the
// arguments may hold, finishes (or is stopped) within the evaluation
// timeout; a longer list is refused before any walking. cel-go's cost
// tracking makes each step of a walk dearer as it goes, so the cost limit
// alone let a 20,000-item list hold a core for half a second.
func TestRuleWalksBoundedInTime(t *testing.T) {
	r, err := Compile("r", "arguments.items.all(i, i <= 100)", "")
	if err != nil {
		t.Fatal(err)
	}
	list := func(n int) json.RawMessage {
		return json.RawMessage(`{"items": [` + strings.Repeat(`1,`, n-1) + `1]}`)
	}
	start := time.Now()
	_, _ = r.Eval(&Input{Arguments: list(MaxArgumentsList)})
	if took := time.Since(start); took > 10*EvalTimeout {
		t.Errorf("walking %d items took %v, want about %v at most", MaxArgumentsList, took, EvalTimeout)
	}
	if _, err := r.Eval(&Input{Arguments: list(MaxArgumentsList + 1)}); !errors.Is(err, ErrArguments) {
		t.Errorf("a list of %d items = %v, want ErrArguments", MaxArgumentsList+1, err)
	}
}

func TestDeepArgumentsFailTheRule(t *testing.T) {
	r, _ := Compile("r", "has(arguments.a)", "")
	deep := strings.Repeat(`{"a":`, MaxArgumentsDepth+1) + "1" + strings.Repeat("}", MaxArgumentsDepth+1)
	if _, err := r.Eval(&Input{Arguments: json.RawMessage(deep)}); !errors.Is(err, ErrArguments) {
		t.Fatalf("arguments nested %d deep = %v, want ErrArguments", MaxArgumentsDepth+1, err)
	}
}

// FuzzEval feeds hostile arguments to rules that read them: whatever the
// input, an evaluation ends, without a panic, in a decision or an error.
func FuzzEval(f *testing.F) {
	for _, s := range []string{`{"amount": 5}`, `{"amount": 1e308}`, `{"amount": -9223372036854775809}`,
		`{"items": [[[[[]]]]]}`, `{"owner": "did:key:\u202e\ufeff"}`, `{"a": {"a": {"a": {}}}}`, `{"amount": "5"}`,
		`{"amount": null}`, `{"amount": 5, "AMOUNT": 6}`, `{"\u212aey": 1, "key": 2}`, `[]`, `"x"`, `{`} {
		f.Add(s)
	}
	var compiled []*Rule
	for _, e := range []string{
		"arguments.amount <= 100",
		"has(arguments.items) && arguments.items.all(i, string(i).size() < 100)",
		"arguments.owner == user.did",
		"arguments.exists(k, k.startsWith('a'))",
		"arguments.size() >= 0 && arguments.all(k, k != 'x')",
	} {
		r, err := Compile("fuzz", e, "")
		if err != nil {
			f.Fatal(err)
		}
		compiled = append(compiled, r)
	}
	f.Fuzz(func(t *testing.T, args string) {
		for _, r := range compiled {
			in := &Input{User: map[string]any{"did": "did:key:u"}, Arguments: json.RawMessage(args)}
			_, _ = r.Eval(in)
			_, _ = r.EvalListing(in)
		}
	})
}
