package jsonkey

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestFold(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"params", "params", true},
		{"params", "PARAMS", true},
		{"params", "Params", true},
		{"params", "paramſ", true},   // U+017F LATIN SMALL LETTER LONG S
		{"key", "\u212aey", true},    // U+212A KELVIN SIGN
		{"id", "İd", true},           // U+0130, folded by Go before 1.21
		{"id", "ıd", true},           // U+0131, likewise
		{"name", "nam\u00e9", false}, // é is not e
		{"a\xffb", "a\xfeb", true},   // both read as U+FFFD
		{"a\xffb", "a\uFFFDb", true}, //
		{"credential", "credentials", false},
		{"ß", "ẞ", true},
	} {
		if got := Fold(tc.a) == Fold(tc.b); got != tc.same {
			t.Errorf("Fold(%q) == Fold(%q): %t, want %t", tc.a, tc.b, got, tc.same)
		}
	}
}

// TestFoldCoversDecoders checks every rune: runes that strings.EqualFold
// (and so today's encoding/json) or the older ToUpper(ToLower) fold match
// get one key.
func TestFoldCoversDecoders(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		k := Fold(string(r))
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if Fold(string(f)) != k {
				t.Fatalf("U+%04X and U+%04X are EqualFold but fold apart", r, f)
			}
		}
		if o := unicode.ToUpper(unicode.ToLower(r)); Fold(string(o)) != k {
			t.Fatalf("U+%04X and U+%04X fold together in old encoding/json but apart here", r, o)
		}
	}
}

// TestFoldMatchesEncodingJSON: whenever encoding/json reads a member into a
// field, the member's name and the field's fold together.
func TestFoldMatchesEncodingJSON(t *testing.T) {
	for _, name := range []string{"params", "Params", "paramſ", "PARAMſ", "\u212aey", "key", "KEY", "pArAmS"} {
		var v struct {
			Params string `json:"params"`
			Key    string `json:"key"`
		}
		b, _ := json.Marshal(map[string]string{name: "x"})
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		for field, got := range map[string]string{"params": v.Params, "key": v.Key} {
			if (got == "x") != (Fold(name) == Fold(field)) {
				t.Errorf("%q → field %q: encoding/json %t, Fold %t", name, field, got == "x", Fold(name) == Fold(field))
			}
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		known []string
		want  error
	}{
		{"empty", nil, nil, nil},
		{"distinct", []string{"a", "b", "params"}, []string{"params"}, nil},
		{"exact repeat", []string{"params", "a", "params"}, nil, ErrRepeated},
		{"case repeat", []string{"params", "Params"}, nil, ErrRepeated},
		{"long s repeat", []string{"params", "paramſ"}, nil, ErrRepeated},
		{"unknown names repeat", []string{"foo", "FOO"}, []string{"params"}, ErrRepeated},
		{"lone variant of a known name", []string{"Credential"}, []string{"credential"}, ErrVariant},
		{"lone folded variant", []string{"paramſ"}, []string{"params"}, ErrVariant},
		{"variant of an unknown name", []string{"Foo"}, []string{"params"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Check(tc.names, tc.known...); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("Check(%q, %q) = %v, want %v", tc.names, tc.known, err, tc.want)
			}
		})
	}
}

func BenchmarkFoldASCII(b *testing.B) {
	s := strings.Repeat("signedChallenge", 2)
	for b.Loop() {
		_ = Fold(s)
	}
}
