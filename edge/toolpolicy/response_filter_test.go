package toolpolicy

import "testing"

func TestJSONValueEnd(t *testing.T) {
	tests := []struct {
		in   []string
		end  int // in the last piece; -1 none
		bad  bool
		desc string
	}{
		{[]string{`{"a":1}`}, 7, false, "object"},
		{[]string{` [1,`, `{"b":"}]\""}] `}, 13, false, "strings with brackets and escapes, split"},
		{[]string{`{"a":"\\`, `"}`}, 2, false, "escaped backslash across pieces"},
		{[]string{`{"a":`}, -1, false, "incomplete"},
		{[]string{`"str"`}, -1, true, "string"},
		{[]string{`nope`}, -1, true, "garbage"},
		{[]string{`}`}, -1, true, "closing first"},
	}
	for _, tt := range tests {
		var s jsonValueEnd
		end, bad := -1, false
		for _, p := range tt.in {
			end, bad = s.feed([]byte(p))
		}
		if end != tt.end || bad != tt.bad {
			t.Errorf("%s: end %d bad %t, want %d %t", tt.desc, end, bad, tt.end, tt.bad)
		}
	}
}
