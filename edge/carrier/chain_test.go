package carrier

import (
	"strings"
	"testing"
)

func TestParseChain(t *testing.T) {
	const a, b = "h.p.s", "h2.p2.s2"
	tests := []struct {
		vals []string
		want []string
		err  error
	}{
		{vals: nil},
		{vals: []string{"  "}},
		{vals: []string{a}, want: []string{a}},
		{vals: []string{" " + a + " ,, " + b + ","}, want: []string{a, b}},
		{vals: []string{a, b}, want: []string{a, b}},
		{vals: []string{`[" ` + a + `", {"x": 1}]`}, want: []string{a, `{"x": 1}`}},
		{vals: []string{`{"x": [1, 2]}`}, want: []string{`{"x": [1, 2]}`}},
		{vals: []string{`[]`}},
		{vals: []string{`[1]`}, err: ErrChainMalformed},
		{vals: []string{`["a"] x`}, err: ErrChainMalformed},
		{vals: []string{`{`}, err: ErrChainMalformed},
		{vals: []string{strings.Repeat("x", 101)}, err: ErrChainTooLarge},
		{vals: []string{strings.Repeat("a,", MaxAncestors+1)}, err: ErrChainTooLarge},
	}
	for _, tt := range tests {
		got, err := ParseChain(tt.vals, 100)
		if err != tt.err {
			t.Errorf("%q: err %v, want %v", tt.vals, err, tt.err)
			continue
		}
		var s []string
		for _, g := range got {
			s = append(s, string(g))
		}
		if strings.Join(s, "|") != strings.Join(tt.want, "|") {
			t.Errorf("%q: %q, want %q", tt.vals, s, tt.want)
		}
	}
}
