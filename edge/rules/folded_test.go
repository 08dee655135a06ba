package rules

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestFoldedMemberRefused: a member a rule reads, given only in another
// letter case, is an error, not an absent member: a Go upstream would
// read it under the name the rule checked.
func TestFoldedMemberRefused(t *testing.T) {
	r, err := Compile("internal_only", `!has(arguments.to) || arguments.to.endsWith("@corp.example")`, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args    string
		want    bool
		refused bool
	}{
		{`{"to": "a@corp.example"}`, true, false},
		{`{"to": "mallory@evil.example"}`, false, false},
		{`{}`, true, false},
		{`{"too": "x", "t": "y"}`, true, false},
		{`{"TO": "mallory@evil.example"}`, false, true},
		{`{"To": "mallory@evil.example"}`, false, true},
		{`{"\u0054o": "mallory@evil.example"}`, false, true},
		{`{"nested": {"TO": 1}}`, true, false}, // not the member read
	} {
		ok, err := r.Eval(&Input{Arguments: json.RawMessage(tc.args)})
		if ok != tc.want || (err != nil) != tc.refused || (tc.refused && !errors.Is(err, ErrArguments)) {
			t.Errorf("%s: %t, %v; want %t, error %t", tc.args, ok, err, tc.want, tc.refused)
		}
	}
	// The Kelvin sign folds to k; so does ſ (U+017F) to s.
	r, err = Compile("keyed", `!has(arguments.key) && !has(arguments.s)`, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{"\u212aey": 1}`, "{\"\u017f\": 1}"} {
		if ok, err := r.Eval(&Input{Arguments: json.RawMessage(args)}); ok || !errors.Is(err, ErrArguments) {
			t.Errorf("%s: %t, %v; want refused", args, ok, err)
		}
	}
}
