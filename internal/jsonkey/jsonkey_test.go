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

// add opens an object in m, adds names and reports the first error.
func add(m *Members, names ...string) error {
	for _, n := range names {
		if err := m.Add(n); err != nil {
			return err
		}
	}
	return nil
}

func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		want  error
	}{
		{"distinct", []string{"id", "type", "credentialSubject", "nam\u00e9", "name"}, nil},
		{"exact", []string{"id", "type", "id"}, ErrRepeated},
		{"ASCII case", []string{"credentialSubject", "credentialsubject"}, ErrRepeated},
		{"Kelvin sign", []string{"K", "\u212a"}, ErrRepeated},
		{"Kelvin sign first", []string{"\u212aid", "kID"}, ErrRepeated},
		{"long s", []string{"scope\u017f", "SCOPES"}, ErrRepeated},
		{"dotted capital I", []string{"\u0130d", "ID"}, ErrRepeated},
		{"two non-ASCII", []string{"\u00e9", "\u00c9"}, ErrRepeated},
		{"invalid UTF-8", []string{"a\xff", "a\xfe"}, ErrRepeated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Members
			m.Open()
			if err := add(&m, tc.names...); err != tc.want {
				t.Fatalf("Add %q: %v, want %v", tc.names, err, tc.want)
			}
		})
	}
}

// A name repeats only within its own object: not in a parent, a child or a
// closed sibling; and this holds past the inline levels and names, and once
// an object holds its keys in a set.
func TestMembersNesting(t *testing.T) {
	for _, width := range []int{1, 3, linearMax, linearMax + 1, 3 * linearMax} {
		var m Members
		names := func(level int) []string {
			out := make([]string, width)
			for i := range out {
				out[i] = "n" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + string(rune('A'+level%26))
			}
			return out
		}
		const depth = 3 * inlineDepth
		for level := range depth {
			m.Open()
			// The same names in every level, in another case, then a
			// level-specific one, so that each level holds width+1 names.
			for _, n := range names(0) {
				if err := m.Add(n); err != nil {
					t.Fatalf("width %d level %d: %q: %v", width, level, n, err)
				}
			}
			if err := m.Add(names(level)[0] + "!"); err != nil {
				t.Fatal(err)
			}
		}
		for level := depth - 1; level >= 0; level-- {
			// Each level still refuses its own names, in any case.
			if err := m.Add(strings.ToUpper(names(0)[width-1])); err != ErrRepeated {
				t.Fatalf("width %d level %d: repeat not refused: %v", width, level, err)
			}
			m.Open() // a sibling of the closed child, empty again
			if err := add(&m, names(0)...); err != nil {
				t.Fatalf("width %d level %d: sibling: %v", width, level, err)
			}
			m.Close()
			m.Close()
		}
		if m.n != 0 || m.depth != 0 || len(m.sets) != 0 || len(m.more) != 0 {
			t.Fatalf("width %d: left %d names, depth %d, %d sets", width, m.n, m.depth, len(m.sets))
		}
	}
}

// An object of many members is checked with a set, not by comparing each
// name with all the earlier ones (quadratic in a hostile object).
func TestMembersManyUseSet(t *testing.T) {
	var m Members
	m.Open()
	for i := range linearMax + 1 {
		if err := m.Add(string(rune('a' + i))); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.sets) != 1 {
		t.Fatalf("%d names compared one by one", m.n)
	}
	if err := m.Add("B"); err != ErrRepeated {
		t.Fatalf("repeat in the set: %v", err)
	}
	if err := m.Add("\u212a"); err != ErrRepeated { // 'k' is the 11th name
		t.Fatalf("folded repeat in the set: %v", err)
	}
}

// Members compares names as Fold does, for every rune that has a case (and
// a sample of the others): beside its upper case, lower case and simple
// fold, ASCII-prefixed so that the ASCII lowering of held names meets
// non-ASCII fold keys.
func TestMembersMatchesFold(t *testing.T) {
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		cased := unicode.SimpleFold(r) != r || unicode.ToUpper(r) != r || unicode.ToLower(r) != r
		if !utf8.ValidRune(r) || !cased && r%251 != 0 {
			continue
		}
		a := "X" + string(r)
		for _, b := range []string{"x" + string(unicode.ToUpper(r)), "x" + string(unicode.ToLower(r)), "x" + string(unicode.SimpleFold(r))} {
			var m Members
			m.Open()
			got := add(&m, a, b) == ErrRepeated
			if want := Fold(a) == Fold(b); got != want {
				t.Fatalf("%q, %q: repeated %t, Fold says %t", a, b, got, want)
			}
		}
	}
}

func BenchmarkMembersCredential(b *testing.B) {
	levels := [][]string{
		{"iss", "sub", "aud", "nbf", "iat", "exp", "jti", "vc"},
		{"@context", "id", "type", "issuer", "issuanceDate", "expirationDate", "credentialSubject"},
		{"id", "delegation"},
		{"id", "issuerDid", "subjectDid", "userDid", "scopes", "constraints", "status", "createdAt"},
		{"scopes", "notBefore", "notAfter", "audience"},
	}
	b.ReportAllocs()
	for b.Loop() {
		var m Members
		for _, l := range levels {
			m.Open()
			if err := add(&m, l...); err != nil {
				b.Fatal(err)
			}
		}
		for range levels {
			m.Close()
		}
	}
}

// FoldsTo is Fold(name) == Fold(key), with or without its ASCII path.
func TestFoldsTo(t *testing.T) {
	names := []string{"params", "PARAMS", "Params", "paramſ", "param", "paramss", "", "id", "ID", "iD",
		"\u212aey", "key", "KEY", "kex", "org.kya-os/request-proof", "ORG.KYA-OS/REQUEST-PROOF",
		"org.\u212aya-os/request-proof", "İd", "id\xff", "a/b", "A/B"}
	for _, name := range names {
		for _, key := range names {
			if got, want := FoldsTo([]byte(name), key), Fold(name) == Fold(key); got != want {
				t.Errorf("FoldsTo(%q, %q) = %v, Fold says %v", name, key, got, want)
			}
		}
	}
}

func FuzzFoldsTo(f *testing.F) {
	f.Add([]byte("Params"), "params")
	f.Add([]byte("paramſ"), "params")
	f.Fuzz(func(t *testing.T, name []byte, key string) {
		if got, want := FoldsTo(name, key), Fold(string(name)) == Fold(key); got != want {
			t.Fatalf("FoldsTo(%q, %q) = %v, Fold says %v", name, key, got, want)
		}
	})
}
