package toolpolicy

import (
	"bytes"
	"encoding/json"
	"testing"
)

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

// FuzzJSONValueEnd: an upstream answer written in two pieces ends where
// the same answer written at once ends, and a valid JSON object or array
// ends just past its last byte.
func FuzzJSONValueEnd(f *testing.F) {
	f.Add([]byte(`{"a":"}]\""}`), 3)
	f.Add([]byte(` [1,{"b":"\\"}] tail`), 7)
	f.Add([]byte(`"str"`), 1)
	f.Fuzz(func(t *testing.T, body []byte, cut int) {
		var whole jsonValueEnd
		end, bad := whole.feed(body)
		if cut < 0 || cut > len(body) {
			cut = len(body) / 2
		}
		var split jsonValueEnd
		end2, bad2 := split.feed(body[:cut])
		if end2 < 0 && !bad2 {
			if end2, bad2 = split.feed(body[cut:]); end2 >= 0 {
				end2 += cut
			}
		}
		if end != end2 || bad != bad2 {
			t.Fatalf("%q cut at %d: whole (%d, %t), split (%d, %t)", body, cut, end, bad, end2, bad2)
		}
		trimmed := bytes.TrimSpace(body)
		if json.Valid(trimmed) && len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
			if want := bytes.LastIndexAny(body, "}]") + 1; end != want || bad {
				t.Fatalf("%q: end %d bad %t, want %d", body, end, bad, want)
			}
		}
	})
}
