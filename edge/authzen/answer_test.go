package authzen

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       Decision
	}{
		{"allow", `{"decision":true}`, Decision{Allowed: true}},
		{"deny", `{"decision":false}`, Decision{}},
		{"deny with English reason", `{"decision":false,"context":{"id":"0","reason_admin":{"en":"policy C076"},"reason_user":{"es-403":"No","en-403":"Transfers over 100 need approval."}}}`,
			Decision{Reason: "Transfers over 100 need approval."}},
		{"deny with string reason", `{"decision":false,"context":{"reason_user":"Not now."}}`, Decision{Reason: "Not now."}},
		{"deny, reason not text", `{"decision":false,"context":{"reason_user":{"en":5}}}`, Decision{}},
		{"allow ignores reason", `{"decision":true,"context":{"reason_user":{"en":"x"}}}`, Decision{Allowed: true}},
		{"control characters flattened", `{"decision":false,"context":{"reason_user":"a\nb\u202ec"}}`, Decision{Reason: "a b c"}},
		{"null context", `{"decision":false,"context":null}`, Decision{}},
		{"other members", `{"decision":true,"evaluations":[],"x":{"y":1}}`, Decision{Allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAnswer([]byte(tc.body))
			if err != nil || got != tc.want {
				t.Fatalf("ParseAnswer(%s) = %+v, %v; want %+v", tc.body, got, err, tc.want)
			}
		})
	}
}

func TestParseAnswerMalformed(t *testing.T) {
	for _, body := range []string{
		``, `null`, `true`, `[]`, `"decision"`, `{}`,
		`{"decision":"true"}`, `{"decision":1}`, `{"decision":null}`, `{"decision":{}}`,
		`{"decision":true,"decision":false}`, `{"decision":false,"Decision":true}`,
		`{"decision":true,"context":[]}`, `{"decision":true,"context":"x"}`,
		`{"decision":true`, `{"decision":true}{"decision":true}`, `{"decision":true} x`,
		`{"decision":false,"context":{"a":1,"a":2}}`,
		// A lone member in another letter case: encoding/json would take
		// it as "decision", an exact reader would find none.
		`{"Decision":true}`, `{"DECISION":true}`, `{"deciſion":true}`, `{"decision":false,"deciſion":true}`,
		`{"decision":false,"context":{"Reason_user":"x"}}`, `{"decision":true,"Context":{}}`,
	} {
		if d, err := ParseAnswer([]byte(body)); !errors.Is(err, ErrAnswer) {
			t.Errorf("ParseAnswer(%q) = %+v, %v; want ErrAnswer", body, d, err)
		}
	}
}

func TestReasonBounded(t *testing.T) {
	d, err := ParseAnswer([]byte(`{"decision":false,"context":{"reason_user":"` + strings.Repeat("é", 5000) + `"}}`))
	if err != nil || len([]rune(d.Reason)) != maxReason+1 {
		t.Fatalf("reason of %d runes, %v; want %d and an ellipsis", len([]rune(d.Reason)), err, maxReason)
	}
}

func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{`{"decision":true}`, `{"decision":false,"context":{"reason_user":{"en":"x"}}}`, `{"decision":[`,
		`{"Decision":true}`, `{"deciſion":true}`, `{"decision":false,"context":{"reason_USER":"x"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseAnswer(b)
		if err != nil && d != (Decision{}) {
			t.Fatalf("an error with a decision: %+v", d)
		}
		// Whatever the edge accepts, a lenient reader (encoding/json,
		// folding case) reads the same decision from.
		var lenient struct {
			Decision *bool `json:"decision"`
		}
		if err == nil && (json.Unmarshal(b, &lenient) != nil || lenient.Decision == nil || *lenient.Decision != d.Allowed) {
			t.Fatalf("decision %t, encoding/json reads %v", d.Allowed, lenient.Decision)
		}
		if d.Allowed && d.Reason != "" {
			t.Fatal("an allow with a reason")
		}
		if strings.ContainsFunc(d.Reason, func(r rune) bool { return r < ' ' }) {
			t.Fatalf("reason %q is not one line", d.Reason)
		}
	})
}
