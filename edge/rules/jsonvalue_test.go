package rules

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"cel.dev/cel-go/common/types"
)

// TestArgumentsReadWhereTheRuleLooks: a rule sees the arguments as it did
// when they were decoded whole, and what it does not read cannot fail it
// but for what is checked of the whole text (repeats, depth, syntax).
func TestArgumentsReadWhereTheRuleLooks(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxArgumentsDepth+1) + "1" + strings.Repeat("}", MaxArgumentsDepth+1)
	long := `[` + strings.Repeat(`1,`, MaxArgumentsList) + `1]`
	for _, tc := range []struct {
		expr, args string
		want       bool
		err        string
	}{
		{expr: `arguments.ok == 1`, args: `{"ok": 1, "big": 1e400}`, want: true},
		{expr: `arguments.big > 1`, args: `{"ok": 1, "big": 1e400}`, err: "out of range"},
		{expr: `has(arguments.big)`, args: `{"big": -1e400}`, err: "out of range"},
		{expr: `'big' in arguments`, args: `{"big": 1e400}`, err: "out of range"},
		{expr: `arguments.ok == 1`, args: `{"ok": 1, "items": ` + long + `}`, want: true},
		{expr: `arguments.items.size() > 0`, args: `{"items": ` + long + `}`, err: "more than 1000"},
		{expr: `arguments.ok == 1`, args: `{"ok": 1, "d": ` + deep + `}`, err: "nested more than"},
		{expr: `arguments.ok == 1`, args: `{"ok": 1, "d": {"x": 1, "X": 2}}`, err: "cannot be read"},
		{expr: `arguments.ok == 1`, args: `{"ok": 1,}`, err: "cannot be read"},
		{expr: `arguments.ok == 1`, args: `{"ok": 1} {}`, err: "cannot be read"},
		{expr: `arguments.n == 9223372036854775807 && type(arguments.n) == int`, args: `{"n": 9223372036854775807}`, want: true},
		{expr: `type(arguments.n) == double`, args: `{"n": 9223372036854775808}`, want: true},
		{expr: `type(arguments.n) == double && arguments.n == 1.0`, args: `{"n": 1.0}`, want: true},
		{expr: `arguments.n == -0`, args: `{"n": -0}`, want: true},
		{expr: `arguments.amount <= 100`, args: `{"\u0061mount": 50}`, want: true},
		{expr: `arguments["é"] == "\u00e9"`, args: `{"\u00e9": "é"}`, want: true},
		{expr: `arguments.s == "\ufffd"`, args: "{\"s\": \"\xff\"}", want: true},
		{expr: `arguments.s.size() == 1`, args: `{"s": "\ud800"}`, want: true},
		{expr: `arguments.a.b[1].c == true`, args: `{"a": {"b": [0, {"c": true}]}}`, want: true},
		{expr: `arguments.a == {"b": [1, 2.5, "x", null, false]}`, args: `{"a": {"b": [1, 2.5, "x", null, false]}}`, want: true},
		{expr: `arguments.a != {"b": 1}`, args: `{"a": {"b": 1, "c": 2}}`, want: true},
		{expr: `arguments.size() == 3 && arguments.all(k, k in ["a", "b", "c"])`, args: `{"a": 1, "b": 2, "c": 3}`, want: true},
		{expr: `arguments.exists(k, arguments[k] == 2)`, args: `{"a": 1, "b": 2}`, want: true},
		{expr: `arguments.a.size() == 0 && arguments.size() == 1`, args: `{"a": {}}`, want: true},
		{expr: `arguments.size() == 0`, args: `null`, want: true},
		{expr: `arguments.a.b == 1`, args: `{"a": "text"}`, err: "no such key"},
		{expr: `has(arguments.a.b)`, args: `{"a": 5}`, want: false},
		{expr: `arguments.a["1"] == 1`, args: `{"a": {"1": 1}}`, want: true},
	} {
		r, err := Compile("r", tc.expr, "")
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.expr, err)
		}
		got, err := r.Eval(&Input{Arguments: json.RawMessage(tc.args)})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s with %.60s = %v, %v; want an error with %q", tc.expr, tc.args, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s with %.60s = %v, %v; want %v", tc.expr, tc.args, got, err, tc.want)
		}
	}
}

// TestArgumentsErrorsWrapErrArguments: what the edge will not read of the
// arguments is told apart from a rule's own error (the log names it).
func TestArgumentsErrorsWrapErrArguments(t *testing.T) {
	for _, tc := range []struct{ expr, args string }{
		{`arguments.n > 1`, `{"n": 1e999}`},
		{`arguments.l.size() > 1`, `{"l": [` + strings.Repeat(`0,`, MaxArgumentsList) + `0]}`},
		{`arguments.size() >= 0`, `{"a": 1, "A": 1}`},
		{`arguments.size() > 0`, `[]`},
	} {
		r, err := Compile("r", tc.expr, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Eval(&Input{Arguments: json.RawMessage(tc.args)}); !errors.Is(err, ErrArguments) {
			t.Errorf("%s with %.40s: %v, want ErrArguments", tc.expr, tc.args, err)
		}
	}
}

// FuzzArguments: whatever the arguments, reading them where a rule looks
// never panics, takes bounded time, and agrees with decoding them whole:
// arguments that decode read as the same value, and arguments refused
// before any rule runs are refused by the decoder too.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{
		`{"amount": 5}`, `{"a": {"b": [1, 2.5, "x", null, true]}}`, `{"n": 1e400}`, `{"n": -9223372036854775809}`,
		`{"n": 1` + strings.Repeat("0", 400) + `}`, `{"n": 0.` + strings.Repeat("0", 400) + `1}`,
		strings.Repeat(`{"a":`, MaxArgumentsDepth) + "1" + strings.Repeat("}", MaxArgumentsDepth),
		strings.Repeat(`{"a":`, MaxArgumentsDepth+1) + "1" + strings.Repeat("}", MaxArgumentsDepth+1),
		`{"a": ` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}`,
		"{\"\xff\": \"\xfe\", \"\\ufffd\": 1}", `{"\u212aey": 1, "key": 2}`, `{"\ud800": "\udc00\u202e\ufeff"}`,
		`{"a": 1, "a": 2}`, `{"l": [` + strings.Repeat(`{},`, MaxArgumentsList) + `{}]}`, `[1]`, `"x"`, `{`, ``, `null`,
	} {
		f.Add(s)
	}
	var compiled []*Rule
	for _, e := range []string{
		"arguments == arguments",
		"arguments.exists(k, k in arguments && string(arguments[k]) != '')",
		"has(arguments.a) && has(arguments.a.a) && arguments.a.a.a == 1",
		"arguments.all(k, type(arguments[k]) == list ? arguments[k].all(x, x == x) : true)",
		"has(arguments.n) && arguments.n > 0",
		"arguments.size() < 10 && arguments.map(k, k).size() >= 0",
	} {
		r, err := Compile("fuzz", e, "")
		if err != nil {
			f.Fatal(err)
		}
		compiled = append(compiled, r)
	}
	f.Fuzz(func(t *testing.T, args string) {
		lazy, lazyErr := readArguments([]byte(args))
		whole, wholeErr := decodeWhole(json.RawMessage(args))
		switch {
		case lazyErr != nil && wholeErr == nil:
			t.Fatalf("arguments %q refused (%v), and they decode", args, lazyErr)
		case lazyErr == nil && wholeErr == nil:
			if eq := lazy.Equal(types.DefaultTypeAdapter.NativeToValue(whole)); eq != types.True {
				t.Fatalf("arguments %q read as %v, decoded as %v", args, lazy, whole)
			}
		}
		for _, r := range compiled {
			start := time.Now()
			_, _ = r.Eval(&Input{Arguments: json.RawMessage(args)})
			if took := time.Since(start); took > 50*EvalTimeout {
				t.Fatalf("%s with %q took %v", r.Expr, args, took)
			}
		}
	})
}

// TestReadObjectMarshalsAsItsText: a credential's constraints bound for
// the rules go to the PDP as the issuer wrote them.
func TestReadObjectMarshalsAsItsText(t *testing.T) {
	v, err := ReadObject([]byte(`{"maxAmount": 500, "regions": ["eu"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"constraints": v})
	if err != nil || string(b) != `{"constraints":{"maxAmount":500,"regions":["eu"]}}` {
		t.Fatalf("marshalled %s, %v", b, err)
	}
	if _, err := ReadObject([]byte(`{"a": 1, "A": 2}`)); !errors.Is(err, ErrArguments) {
		t.Fatalf("repeated member: %v", err)
	}
}
