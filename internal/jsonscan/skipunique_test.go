package jsonscan

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

// skipUniqueWhole reads all of b with one SkipUnique.
func skipUniqueWhole(b []byte) error {
	var names jsonkey.Members
	c := NewCursor(b)
	if _, _, err := c.SkipUnique(&names); err != nil {
		return err
	}
	if !c.Done() {
		return ErrSyntax
	}
	return nil
}

// skipUniqueMembers reads b the way a decoder does: it steps into a
// top-level object, adds each name to the set itself, and skips each
// value with SkipUnique, so that the skipped values' names are checked
// against the caller's open objects.
func skipUniqueMembers(b []byte) error {
	var names jsonkey.Members
	c := NewCursor(b)
	if !c.Object() {
		return skipUniqueWhole(b)
	}
	names.Open()
	for c.NextMember() {
		if err := names.Add(string(Unquote(c.Key()))); err != nil {
			return err
		}
		if _, _, err := c.SkipUnique(&names); err != nil {
			return err
		}
	}
	names.Close()
	if !c.Done() {
		return ErrSyntax
	}
	return nil
}

func TestSkipUnique(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want error
	}{
		{"scalar", `1`, nil},
		{"distinct", `{"a":1,"b":{"a":1,"b":[{"a":1},{"a":2}]},"c":{}}`, nil},
		{"same name in parent and child", `{"id":{"id":{"id":1}}}`, nil},
		{"top-level repeat", `{"a":1,"a":2}`, jsonkey.ErrRepeated},
		{"top-level case repeat", `{"iss":1,"ISS":2}`, jsonkey.ErrRepeated},
		{"top-level escaped repeat", `{"id":1,"\u0069d":2}`, jsonkey.ErrRepeated},
		{"repeat in a skipped value", `{"vc":{"credentialSubject":{"id":1,"Id":2}}}`, jsonkey.ErrRepeated},
		{"repeat deep in an array", `{"a":[1,[{"x":{"y":1,"\u212a":1,"k":2}}]]}`, jsonkey.ErrRepeated},
		{"invalid UTF-8 read as U+FFFD", "{\"a\xff\":1,\"a\\ufffd\":2}", jsonkey.ErrRepeated},
		{"not JSON", `{"a":1`, ErrSyntax},
		{"unterminated nested", `{"a":{"b":[1,2}}`, ErrSyntax},
		{"trailing comma", `{"a":{"b":1,}}`, ErrSyntax},
		{"trailing data", `{"a":{}} {}`, ErrSyntax},
		{"bad escape in a nested name", `{"a":{"\x":1}}`, ErrSyntax},
		{"control character", "{\"a\":\"\x01\"}", ErrSyntax},
		{"too deep", strings.Repeat(`[`, MaxDepth+1) + strings.Repeat(`]`, MaxDepth+1), ErrSyntax},
		{"deepest allowed", `{"a":` + strings.Repeat(`[`, MaxDepth-1) + strings.Repeat(`]`, MaxDepth-1) + `}`, nil},
		{"too deep under a member", `{"a":` + strings.Repeat(`[`, MaxDepth) + strings.Repeat(`]`, MaxDepth) + `}`, ErrSyntax},
		{"nested repeat before a syntax error", `{"a":{"b":1,"b":2,}}`, jsonkey.ErrRepeated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for what, read := range map[string]func([]byte) error{"whole": skipUniqueWhole, "by member": skipUniqueMembers} {
				if err := read([]byte(tc.in)); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
					t.Errorf("%s: %v, want %v", what, err, tc.want)
				}
			}
		})
	}
}

// TestSkipUniqueKeepsNamesOnTheStack: the caller's name set is not moved
// to the heap by being passed, so a decoder holding one in a local
// variable reads a document without allocating.
func TestSkipUniqueKeepsNamesOnTheStack(t *testing.T) {
	b := []byte(`{"iss":"did:web:a","vc":{"credentialSubject":{"id":"x","scopes":["a","b"]}},"exp":1}`)
	if err := skipUniqueWhole(b); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = skipUniqueWhole(b) }); n != 0 {
		t.Errorf("%.0f allocations, want none", n)
	}
}

// FuzzSkipUnique: one SkipUnique of a whole document is CheckMembers; a
// decoder reading the top-level names itself accepts the same documents,
// and finds every repeat of a valid document.
func FuzzSkipUnique(f *testing.F) {
	for _, s := range append(cursorCases,
		`{"a":1,"a":2}`, `{"id":1,"\u0069d":2}`, `{"a":{"k":1,"\u212a":2}}`, `{"a":1,"b":{"A":2}}`,
		`{"a":{"b":1},"A":2}`, "{\"a\xff\":1,\"a\\ufffd\":2}", `{"a":1,"a"}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want := CheckMembers(in)
		if got := skipUniqueWhole(in); got != want {
			t.Fatalf("%q: SkipUnique %v, CheckMembers %v", in, got, want)
		}
		got := skipUniqueMembers(in)
		switch {
		case (got == nil) != (want == nil):
			t.Fatalf("%q: by member %v, CheckMembers %v", in, got, want)
		case got == jsonkey.ErrRepeated && want != jsonkey.ErrRepeated:
			t.Fatalf("%q: by member found a repeat CheckMembers does not", in)
		case want == jsonkey.ErrRepeated && Valid(in) && got != jsonkey.ErrRepeated:
			t.Fatalf("%q: by member missed a repeat: %v", in, got)
		}
	})
}
