package jsonscan

// Inputs on which a hand-written walker most often parts from
// encoding/json: every case here must agree. The ones other parsers read
// differently (BOM, NaN, UTF-16, depth past 10000) are invalid to both Go
// readers, which is what the edge relies on.

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestAgreesOnValidEdgeCases(t *testing.T) {
	in := []string{
		// Encodings and whitespace other parsers accept.
		"\xef\xbb\xbf{}", "\xfe\xff\x00{\x00}", "{\x00\"\x00a\x00\"\x00:\x001\x00}\x00", "\u00a0{}", "\f{}", "\v{}",
		"{}\u2028", `NaN`, `{"a":NaN}`, `{"a":Infinity}`, `{"a":-Infinity}`, `[1,2,]`, `{'a':1}`, `{a:1}`,
		`// c` + "\n{}", `{"a":1/*c*/}`, `0x10`, `+1`, `1_000`, `.5`, `5.`, `-.5`, `1e`, `1e+`, `-`, `--1`, `-01`,
		// Strings: controls, escapes, surrogates, UTF-8.
		"\"\x00\"", `"\u0000"`, `"\ud800"`, `"\udc00\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", "\"\xc0\xaf\"",
		"\"\xed\xa0\x80\"", `"\u12"`, `"\u123`, `"\u1234`, `"\u1234"`, `"\U1234"`, `"\x41"`, `"\'"`, `"\/"`,
		`"\`, `"\\"`, `"\\\"`, `"a` + "\n" + `b"`, "\"\x7f\"", "\"\t\"",
		// Literals.
		`nul`, `nulL`, `True`, `true false`, `truefalse`, `[true,false,null]`, `[nul]`,
		// Structure.
		`{"a":1,"a":2}`, `{"":1}`, `{"a":{"a":{"a":{}}}}`, `[[[[]]]]`, `[{}]`, `{"a":[]}`, `{"a" : 1 , "b" : [ ] }`,
		`{"a":1}{"b":2}`, `{"a":1} {"b":2}`, `[] []`, `{"a":}`, `{:1}`, `{"a"::1}`, `{"a":1,,"b":2}`, `[1 2]`,
		`{"a":1]`, `["a":1]`, `{"a",1}`, `{]`, `[}`, `{"a":[}]}`, `{"a":{]}}`,
	}
	for _, s := range in {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid says %v", s, got, want)
		}
	}
}

// The nesting limit: 10000 levels are valid, 10001 are not, whichever
// containers they are; the bit stack crosses word boundaries (64, 128, …)
// with closers of the wrong kind at every depth.
func TestDepthLimitAndBitStack(t *testing.T) {
	nest := func(n int, obj func(i int) bool, inner string) string {
		var b strings.Builder
		for i := range n {
			if obj(i) {
				b.WriteString(`{"k":`)
			} else {
				b.WriteString(`[`)
			}
		}
		b.WriteString(inner)
		for i := n - 1; i >= 0; i-- {
			if obj(i) {
				b.WriteString(`}`)
			} else {
				b.WriteString(`]`)
			}
		}
		return b.String()
	}
	kinds := map[string]func(int) bool{
		"arrays":      func(int) bool { return false },
		"objects":     func(int) bool { return true },
		"alternating": func(i int) bool { return i%2 == 0 },
		"every third": func(i int) bool { return i%3 == 0 },
	}
	for name, obj := range kinds {
		for _, n := range []int{9999, 10000, 10001} {
			for _, inner := range []string{"1", "[]", "{}"} {
				s := nest(n, obj, inner)
				if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
					t.Errorf("%s depth %d inner %s: Valid = %v, json.Valid says %v", name, n, inner, got, want)
				}
			}
		}
		for _, n := range []int{64, 65, 127, 128, 129, 192, 193, 4096} {
			s := nest(n, obj, "1")
			// Flip the kind of each closer in turn.
			closers := len(s) - strings.LastIndex(s, "1") - 1
			for k := range closers {
				pos := len(s) - closers + k
				b := []byte(s)
				if b[pos] == '}' {
					b[pos] = ']'
				} else {
					b[pos] = '}'
				}
				if got, want := Valid(b), json.Valid(b); got != want {
					t.Errorf("%s depth %d, closer %d flipped: Valid = %v, json.Valid says %v", name, n, k, got, want)
				}
			}
		}
	}
}

// Walk reports exactly the top-level members encoding/json's tokenizer
// sees, in order, duplicates included, however deep their values nest and
// however their keys are escaped.
func TestWalkMembersMatchTokenizer(t *testing.T) {
	deep := strings.Repeat(`{"x":[`, 70) + "1" + strings.Repeat(`]}`, 70)
	in := []string{
		`{"vc":1,"vc":2}`,
		`{"a":` + deep + `,"vc":{}}`,
		`{"a":{"vc":1},"b":[{"vp":2}],"c":"\"vc\":"}`,
		`{"v\u0063":null,"\u0076p":[],"V\u0043":{}}`,
		`{ "a" : [ ] , "b" : { } , "c" : "" }`,
		`{"\ud800":1,"\udc00":2}`,
		"{\"\xff\":1}",
		`{"":{"":{"":1}},"":2}`,
	}
	for _, s := range in {
		var got []string
		if !Walk([]byte(s), func(key, val []byte) {
			got = append(got, string(key)+"="+string(val))
		}) {
			t.Errorf("Walk(%q) invalid", s)
			continue
		}
		want := tokenizerMembers(t, s)
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("Walk(%q) members\n got %q\nwant %q", s, got, want)
		}
	}
}

// tokenizerMembers lists the top-level members of the object s as
// "key=value", the key quoted as in s, read with encoding/json's Decoder.
func tokenizerMembers(t *testing.T, s string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%q: not an object", s)
	}
	var out []string
	for dec.More() {
		keyStart := int(dec.InputOffset())
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		keyEnd := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		key := bytes.TrimLeft([]byte(s[keyStart:keyEnd]), " ,\t\r\n")
		out = append(out, string(key)+"="+string(raw))
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return out
}
