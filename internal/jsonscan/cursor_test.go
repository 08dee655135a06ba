package jsonscan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// walkAll reads b with a cursor, stepping into the containers whose depth
// and position descend allows and skipping the others, and returns what
// it read as text: keys decoded, the raw bytes of skipped values, brackets
// for entered containers. It checks the offsets it is given on the way.
func walkAll(t testing.TB, b []byte, descend func(depth, pos int) bool) (string, bool) {
	c := NewCursor(b)
	var out strings.Builder
	var value func(depth int)
	value = func(depth int) {
		pos := c.Pos()
		switch {
		case descend(depth, pos) && c.Object():
			out.WriteByte('{')
			for c.NextMember() {
				key, ks := c.Key(), c.KeyStart()
				if !bytes.HasPrefix(b[ks:], key) {
					t.Fatalf("key %q not at offset %d", key, ks)
				}
				fmt.Fprintf(&out, "%q:", Unquote(key))
				value(depth + 1)
			}
			out.WriteByte('}')
		case descend(depth, pos) && c.Array():
			out.WriteByte('[')
			for c.NextElement() {
				value(depth + 1)
				out.WriteByte(',')
			}
			out.WriteByte(']')
		default:
			start, end := c.Skip()
			if start != pos {
				t.Fatalf("value at %d reported at %d", pos, start)
			}
			out.Write(b[start:end])
		}
		out.WriteByte(' ')
	}
	value(0)
	return out.String(), c.Done()
}

// walkRef is walkAll by encoding/json's tokenizer, for valid input.
func walkRef(t testing.TB, b []byte, descend func(depth, pos int) bool) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	var out strings.Builder
	var value func(depth int)
	value = func(depth int) {
		// The offset of the value: past the ':' or ',' and whitespace.
		pos := int(dec.InputOffset())
		for pos < len(b) && (b[pos] == ' ' || b[pos] == '\t' || b[pos] == '\n' || b[pos] == '\r' || b[pos] == ':' || b[pos] == ',') {
			pos++
		}
		if descend(depth, pos) && (b[pos] == '{' || b[pos] == '[') {
			tok, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			obj := tok == json.Delim('{')
			out.WriteString(tok.(json.Delim).String())
			for dec.More() {
				if obj {
					k, err := dec.Token()
					if err != nil {
						t.Fatal(err)
					}
					fmt.Fprintf(&out, "%q:", k)
					value(depth + 1)
				} else {
					value(depth + 1)
					out.WriteByte(',')
				}
			}
			end, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			out.WriteString(end.(json.Delim).String())
		} else {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatal(err)
			}
			out.Write(raw)
		}
		out.WriteByte(' ')
	}
	value(0)
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("trailing data after the reference walk: %v", err)
	}
	return out.String()
}

// descenders are the ways a caller may walk a document: into everything,
// into nothing (one Skip), into the first levels only, and into every
// other container.
var descenders = map[string]func(depth, pos int) bool{
	"all":     func(int, int) bool { return true },
	"none":    func(int, int) bool { return false },
	"depth 2": func(d, _ int) bool { return d < 2 },
	"odd":     func(_, pos int) bool { return pos%2 == 1 },
}

// checkCursor: however a document is walked, the cursor finds it valid
// exactly when json.Valid does, and reads what encoding/json reads.
func checkCursor(t *testing.T, in []byte) {
	t.Helper()
	valid := json.Valid(in)
	for name, descend := range descenders {
		got, ok := walkAll(t, in, descend)
		if ok != valid {
			t.Fatalf("%s: cursor says valid %v for %.80q, json.Valid %v", name, ok, in, valid)
		}
		if valid {
			if want := walkRef(t, in, descend); got != want {
				t.Fatalf("%s: cursor read %q\nencoding/json read %q", name, got, want)
			}
		}
	}
}

var cursorCases = []string{
	``, ` `, `1`, `-0`, `1.`, `"a"`, `"\u00zz"`, `true`, `nul`, `[]`, `[1,]`, `[,1]`, `[,]`, `{}`, `{,}`,
	`{"a":1,}`, `{"a"}`, `{"a":}`, `{"a":1 "b":2}`, `{:1}`, `[1}`, `{"a":1]`, `[1]]`, `{"a":1}}`, `{} {}`,
	`[] 1`, `1 1`, "\t{\"a\" :\n[1 , {\"b\":null} ] , \"c\":\"}\"}\r\n", `{"a\u0062":{"x":[2,{"y":"\"]"}]}}`,
	`[{"method":"tools/call","params":{"name":"x","arguments":{"a":[1,2,{}]}}},7,"s",[[]]]`, `{"a":1}` + "\x00",
	"\xef\xbb\xbf{}", `{"a":NaN}`, `{"a":01}`, `[1 2]`, `{"a":{]}}`, `{"a":[}]}`, `{"\x":1}`,
}

func TestCursorAgreesWithEncodingJSON(t *testing.T) {
	in := cursorCases
	for _, depth := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1} {
		in = append(in, strings.Repeat(`{"a":[`, depth/2)+strings.Repeat(`]}`, depth/2))
		in = append(in, strings.Repeat(`[`, depth)+strings.Repeat(`]`, depth))
	}
	for _, s := range in {
		checkCursor(t, []byte(s))
	}
}

func FuzzCursor(f *testing.F) {
	for _, s := range cursorCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkCursor(t, in) })
}

// A member's key and value offsets cut it out of its object.
func TestCursorOffsets(t *testing.T) {
	b := []byte(`{ "a" : 1 , "b\"" : {"c":[true]}, "d":"x" }`)
	c := NewCursor(b)
	if !c.Object() {
		t.Fatal("not an object")
	}
	var got []string
	for c.NextMember() {
		ks := c.KeyStart()
		_, end := c.Skip()
		got = append(got, string(b[ks:end]))
	}
	if !c.Done() {
		t.Fatal("not done")
	}
	if want := `"a" : 1|"b\"" : {"c":[true]}|"d":"x"`; strings.Join(got, "|") != want {
		t.Errorf("members %q, want %s", got, want)
	}
}

// String reads a string value, and any other value without giving it.
func TestCursorString(t *testing.T) {
	c := NewCursor([]byte(`["a\"b", 1, {"x":"y"}]`))
	c.Array()
	var got []string
	for c.NextElement() {
		q, ok := c.String()
		got = append(got, fmt.Sprintf("%s/%v", q, ok))
	}
	if want := `"a\"b"/true /false /false`; strings.Join(got, " ") != want || !c.Done() {
		t.Errorf("String: %q, done %v", got, c.Done())
	}
}

// Misuse fails closed: a value left unread, a second top-level value.
func TestCursorMisuse(t *testing.T) {
	c := NewCursor([]byte(`{"a":1,"b":2}`))
	c.Object()
	c.NextMember()
	if c.NextMember() || c.Done() {
		t.Error("a member read without its value")
	}
	c = NewCursor([]byte(`1`))
	c.Skip()
	if s, e := c.Skip(); s != e || c.Done() {
		t.Error("a second top-level value")
	}
	c = NewCursor([]byte(`{}`))
	if c.Done() {
		t.Error("done before reading")
	}
}

func TestUnquote(t *testing.T) {
	for q, want := range map[string]string{
		`"abc"`: "abc", `""`: "", `"a\u0062\n"`: "ab\n", `"\ud800"`: "\ufffd", "\"\xff\"": "\ufffd", `x`: "", `"`: "",
	} {
		if got := Unquote([]byte(q)); string(got) != want {
			t.Errorf("Unquote(%s) = %q, want %q", q, got, want)
		}
	}
}

// readTwoLevels reads b as the carriers read a JSON-RPC message: the
// members of the top-level object and of the objects in it.
func readTwoLevels(b []byte) bool {
	c := NewCursor(b)
	c.Object()
	for c.NextMember() {
		if c.Object() {
			for c.NextMember() {
				c.Skip()
			}
		} else {
			c.Skip()
		}
	}
	return c.Done()
}

// The cursor is what reads every JSON-RPC body: reading one without
// carriers allocates nothing.
func TestCursorAllocs(t *testing.T) {
	b := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","n":[1,2,{"x":null}]}}}`)
	n := testing.AllocsPerRun(100, func() {
		if !readTwoLevels(b) {
			t.Fatal("not done")
		}
	})
	if n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func BenchmarkCursor(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` +
		strings.Repeat("hello ", 100) + `","n":[1,2,{"x":null}]}}}`)
	b.Run("Valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			Valid(body)
		}
	})
	b.Run("cursor", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			readTwoLevels(body)
		}
	})
}

// Limit bounds the nesting below MaxDepth, counting the containers the
// cursor is in, whether it steps into them or skips them.
func TestCursorLimit(t *testing.T) {
	for _, tc := range []struct {
		in      string
		limit   int
		enter   bool // step into the top-level array instead of skipping it
		tooDeep bool
	}{
		{`1`, 0, false, false},
		{`[]`, 0, false, true},
		{`[]`, -3, false, true},
		{`[[1]]`, 2, false, false},
		{`[[1]]`, 2, true, false},
		{`[[[1]]]`, 2, false, true},
		{`[[[1]]]`, 2, true, true},
		{`[1,{"a":[{}]}]`, 3, true, true},
		{`[1,{"a":[{}]}]`, 4, true, false},
	} {
		c := NewCursor([]byte(tc.in))
		c.Limit(tc.limit)
		if tc.enter && c.Array() {
			for c.NextElement() {
				c.Skip()
			}
		} else {
			c.Skip()
		}
		if c.TooDeep() != tc.tooDeep || c.Failed() != tc.tooDeep || c.Done() == tc.tooDeep {
			t.Errorf("%s, limit %d, enter %v: too deep %v, failed %v, done %v", tc.in, tc.limit, tc.enter, c.TooDeep(), c.Failed(), c.Done())
		}
	}
	c := NewCursor([]byte(`[1,}`))
	c.Skip()
	if !c.Failed() || c.TooDeep() {
		t.Errorf("syntax error: failed %v, too deep %v", c.Failed(), c.TooDeep())
	}
}
