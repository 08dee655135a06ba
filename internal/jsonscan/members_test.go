package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

// repeatedByDecoder is an independent reference for CheckMembers on valid
// JSON: encoding/json's tokenizer, one set of Fold keys per open object.
func repeatedByDecoder(t testing.TB, b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	// Numbers as written: valid JSON may hold one no float64 holds
	// (1e400), which Token would refuse.
	dec.UseNumber()
	type level struct {
		keys    map[string]bool // nil for an array
		wantKey bool            // an object whose next token is a name or '}'
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			t.Fatalf("decoder on valid JSON %q: %v", b, err)
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			if tok != json.Delim('}') {
				k := jsonkey.Fold(tok.(string))
				if stack[n-1].keys[k] {
					return true
				}
				stack[n-1].keys[k] = true
				stack[n-1].wantKey = false
				continue
			}
			stack = stack[:n-1] // and the object, a value, has ended
		} else {
			switch tok {
			case json.Delim('{'):
				stack = append(stack, &level{keys: map[string]bool{}, wantKey: true})
				continue
			case json.Delim('['):
				stack = append(stack, &level{})
				continue
			case json.Delim(']'):
				stack = stack[:n-1]
			}
		}
		// A value ended: the object holding it expects a name next.
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantKey = true
		}
	}
}

// members builds an object with n distinct members named by name(i).
func members(n int, name func(int) string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + name(i) + `":` + "0")
	}
	b.WriteByte('}')
	return b.String()
}

func TestCheckMembers(t *testing.T) {
	many := func(i int) string {
		return "m" + strings.Repeat("x", i%7) + string(rune('a'+i/7%26)) + string(rune('a'+i/182))
	}
	big := members(300, many)
	for _, tc := range []struct {
		name string
		in   string
		want error
	}{
		{"empty object", `{}`, nil},
		{"scalars", `[1,"a",true,null]`, nil},
		{"distinct", `{"a":1,"b":{"a":1,"b":[{"a":1},{"a":2}]},"c":{}}`, nil},
		{"same name in sibling objects", `[{"id":1},{"id":2}]`, nil},
		{"same name in parent and child", `{"id":{"id":{"id":1}}}`, nil},
		{"near names", `{"credential":1,"credentials":2,"nam\u00e9":3,"name":4}`, nil},
		{"many distinct members", big, nil},
		{"exact repeat", `{"a":1,"a":2}`, jsonkey.ErrRepeated},
		{"repeat with other values between", `{"a":1,"b":[{"a":1}],"a":2}`, jsonkey.ErrRepeated},
		{"case repeat", `{"credentialSubject":{},"credentialsubject":{}}`, jsonkey.ErrRepeated},
		{"Kelvin sign", `{"k":1,"\u212a":2}`, jsonkey.ErrRepeated},
		{"Kelvin sign raw", "{\"K\":1,\"\xe2\x84\xaa\":2}", jsonkey.ErrRepeated},
		{"long s", `{"scopes":1,"scope\u017f":2}`, jsonkey.ErrRepeated},
		{"dotted capital I", `{"id":1,"\u0130D":2}`, jsonkey.ErrRepeated},
		{"escaped repeat", `{"id":1,"\u0069d":2}`, jsonkey.ErrRepeated},
		{"invalid UTF-8 read as U+FFFD", "{\"a\xff\":1,\"a\\ufffd\":2}", jsonkey.ErrRepeated},
		{"nested", `{"a":{"b":{"c":1,"C":2}}}`, jsonkey.ErrRepeated},
		{"nested in an array", `{"a":[1,{"x":1,"y":{},"x":2}]}`, jsonkey.ErrRepeated},
		{"after a closed sibling", `{"a":{"b":1},"c":{"b":1,"b":2}}`, jsonkey.ErrRepeated},
		{"last of many members", big[:len(big)-1] + `,"MXXXA":1}`, jsonkey.ErrRepeated},
		{"deep inside many members", big[:len(big)-1] + `,"z":{"q":1,"Q":1}}`, jsonkey.ErrRepeated},
		{"deep", strings.Repeat(`{"a":[`, 40) + `{"x":1,"X":2}` + strings.Repeat("]}", 40), jsonkey.ErrRepeated},
		{"deep, parent's name after", strings.Repeat(`{"a":`, 40) + `{}` + strings.Repeat(`,"b":1,"a":1}`, 40), jsonkey.ErrRepeated},
		{"not JSON", `{"a":1`, ErrSyntax},
		{"trailing data", `{"a":1} x`, ErrSyntax},
		{"bad escape in a name", `{"\x":1}`, ErrSyntax},
		{"repeat before a syntax error", `{"a":1,"a":2,}`, jsonkey.ErrRepeated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckMembers([]byte(tc.in))
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("CheckMembers = %v, want %v", err, tc.want)
			}
			if json.Valid([]byte(tc.in)) {
				if ref := repeatedByDecoder(t, []byte(tc.in)); ref != (err != nil) {
					t.Fatalf("reference says repeated: %t", ref)
				}
			}
		})
	}
}

// Walk and Valid are unchanged by the name checks: a repeat is valid JSON.
func TestWalkAcceptsRepeats(t *testing.T) {
	if !Valid([]byte(`{"a":1,"a":{"b":1,"B":2}}`)) {
		t.Fatal("Valid refused repeated names")
	}
}

func FuzzCheckMembers(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"id":1,"\u0069d":2}`, `{"k":1,"\u212a":2}`, "{\"a\xff\":1,\"a\\ufffd\":2}",
		`[{"id":1},{"id":2}]`, `{"a":{"b":1},"c":{"b":1,"B":2}}`, `{"a":[1,{"x":1}],"b":{}}`,
		members(40, func(i int) string { return string(rune('A' + i)) }), `{"a":1`, `{"\x":1}`, `[]`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		err := CheckMembers(in)
		valid := json.Valid(in)
		switch {
		case err == nil && !valid:
			t.Fatalf("CheckMembers(%q) accepted invalid JSON", in)
		case errors.Is(err, ErrSyntax) && valid:
			t.Fatalf("CheckMembers(%q): ErrSyntax on valid JSON", in)
		case err != nil && !errors.Is(err, ErrSyntax) && !errors.Is(err, jsonkey.ErrRepeated):
			t.Fatalf("CheckMembers(%q) = %v", in, err)
		case valid && repeatedByDecoder(t, in) != (err != nil):
			t.Fatalf("CheckMembers(%q) = %v, reference disagrees", in, err)
		}
	})
}

// TestCheckMembersAllocations: the names of a document without escapes
// are read in place, so the check's cost does not grow with the number of
// members (it was one allocation per member: a request proof in _meta
// made a body cost 20 more).
func TestCheckMembersAllocations(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","n":[1,{"a":true}]},` +
		`"_meta":{"org.kya-os/request-proof":{"prf":"p","alg":"EdDSA","did":"did:key:z","kid":"did:key:z#z","audience":"a","nonce":"n","created":1,"expires":2,"requestHash":"h","jws":"a..b"}}}}`)
	if err := CheckMembers(body); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = CheckMembers(body) }); n > 1 {
		// None: the document is not copied and the name set is pooled (at
		// most one, as the race detector drops pooled values at random).
		t.Errorf("CheckMembers of a 21-member body: %.0f allocations, want none", n)
	}
	// An escaped name still decodes (and is compared unescaped).
	if err := CheckMembers([]byte(`{"id":1,"\u0069d":2}`)); !errors.Is(err, jsonkey.ErrRepeated) {
		t.Errorf("escaped repeat: %v, want ErrRepeated", err)
	}
}

// BenchmarkCheckMembers is CheckMembers on a 2026-era tools/call, the body
// every 2026 request's strict parse checks (mcp.ParseStrict): it allocates
// nothing.
func BenchmarkCheckMembers(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckMembers(body); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCheckMembersLimit(t *testing.T) {
	nest := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, tc := range []struct {
		in    string
		depth int
		want  error
	}{
		{in: nest(3), depth: 3},
		{in: nest(4), depth: 3, want: ErrTooDeep},
		{in: `[[[1]]]`, depth: 3},
		{in: `[[[[1]]]]`, depth: 3, want: ErrTooDeep},
		{in: `1`, depth: 0},
		{in: `[]`, depth: 0, want: ErrTooDeep},
		// The first error met wins.
		{in: `{"a":1,"a":[[[[1]]]]}`, depth: 3, want: jsonkey.ErrRepeated},
		{in: `{"a":[[[[1]]]],"a":1}`, depth: 3, want: ErrTooDeep},
		{in: `{"a":[[1]]`, depth: 3, want: ErrSyntax},
		{in: `{"a":[[[[1]]]`, depth: 3, want: ErrTooDeep},
		{in: `[` + strings.Repeat(`[`, MaxDepth) + `]`, depth: MaxDepth + 5, want: ErrSyntax},
	} {
		if err := CheckMembersLimit([]byte(tc.in), tc.depth); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("CheckMembersLimit(%.40q, %d) = %v, want %v", tc.in, tc.depth, err, tc.want)
		}
	}
}

// FuzzCheckMembersLimit: with a limit, the check agrees with CheckMembers
// but for ErrTooDeep, which it gives only past the limit.
func FuzzCheckMembersLimit(f *testing.F) {
	for _, s := range []string{`{"a":{"a":{"a":1}}}`, `[[[]]]`, `{"a":1,"a":[[[1]]]}`, `[[[`, `"x"`} {
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, in []byte, depth int) {
		depth %= 16
		err, full := CheckMembersLimit(in, depth), CheckMembers(in)
		switch {
		case errors.Is(err, ErrTooDeep):
			if d := maxNesting(in); d <= depth {
				t.Fatalf("CheckMembersLimit(%q, %d) = ErrTooDeep at nesting %d", in, depth, d)
			}
		case err != full:
			t.Fatalf("CheckMembersLimit(%q, %d) = %v, CheckMembers = %v", in, depth, err, full)
		}
	})
}

// maxNesting is the deepest nesting of brackets outside strings in b.
func maxNesting(b []byte) int {
	d, most, inStr, esc := 0, 0, false, false
	for _, c := range b {
		switch {
		case inStr && esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == '{' || c == '['):
			d++
			most = max(most, d)
		case !inStr && (c == '}' || c == ']'):
			d--
		}
	}
	return most
}
