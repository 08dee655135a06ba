package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestPlain(t *testing.T) {
	for in, want := range map[string]bool{
		`""`:                       true,
		`"abc"`:                    true,
		`"0123456789abcdefgh"`:     true,
		`"~"`:                      true,
		`"a\"b"`:                   false,
		`"0123456789\\abcdef"`:     false,
		`"01234567\"0123456789ab"`: false,
		`"é"`:                      false,
		`"0123456789abcdeé"`:       false,
		`"\u00e9"`:                 false,
		// Not a string with its quotes: never plain.
		`"`: false,
		``:  false,
	} {
		if got := Plain([]byte(in)); got != want {
			t.Errorf("Plain(%q) = %t, want %t", in, got, want)
		}
	}
}

// FuzzPlain: a plain string is its own text, as encoding/json reads it.
func FuzzPlain(f *testing.F) {
	for _, s := range []string{`""`, `"abc"`, `"a\"b"`, `"é"`, `"\u00e9x"`, `"0123456789abcdef\/"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := NewCursor(b)
		q, ok := c.String()
		if !ok || !c.Done() || !Plain(q) {
			return
		}
		var s string
		if err := json.Unmarshal(q, &s); err != nil {
			t.Fatalf("%q: the cursor accepted it, encoding/json: %v", b, err)
		}
		if s != string(q[1:len(q)-1]) {
			t.Fatalf("%q: plain, but its value is %q", b, s)
		}
	})
}
