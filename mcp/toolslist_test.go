package mcp

import (
	"encoding/json"
	"errors"
	"testing"
)

func allowOnly(names ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
}

// sameArray reports whether a and b share their first byte: the function
// returned its input rather than a copy.
func sameArray(a, b []byte) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

func TestFilterToolsList(t *testing.T) {
	// Odd spacing, escapes and unknown members everywhere: the kept bytes
	// must come out exactly as they went in.
	const in = `{ "_meta" : {"x":1},
  "tools" : [ {"name":"a","inputSchema":{"type":"object"},"x-vendor":"\u00e9\/"} ,
    {"name":"b","annotations":{"destructiveHint":true}},
    {"name" : "c", "title":"C"} ],
  "nextCursor":"abc", "unknown":[1,2,{"tools":[]}] }`
	const want = `{ "_meta" : {"x":1},
  "tools" : [{"name":"a","inputSchema":{"type":"object"},"x-vendor":"\u00e9\/"},{"name" : "c", "title":"C"}],
  "nextCursor":"abc", "unknown":[1,2,{"tools":[]}] }`
	out, err := FilterToolsList(json.RawMessage(in), allowOnly("a", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}

	t.Run("nothing removed returns the input", func(t *testing.T) {
		out, err := FilterToolsList(json.RawMessage(in), allowOnly("a", "b", "c"))
		if err != nil || string(out) != in {
			t.Errorf("out = %s, err = %v", out, err)
		}
		inb := []byte(in)
		out, _ = FilterToolsList(inb, allowOnly("a", "b", "c"))
		if !sameArray(out, inb) {
			t.Error("unchanged result was copied")
		}
	})
	t.Run("all removed", func(t *testing.T) {
		out, err := FilterToolsList(json.RawMessage(`{"tools":[{"name":"a"},{"name":"b"}]}`), allowOnly())
		if err != nil || string(out) != `{"tools":[]}` {
			t.Errorf("out = %s, err = %v", out, err)
		}
	})
	t.Run("nil allow keeps everything", func(t *testing.T) {
		out, err := FilterToolsList(json.RawMessage(in), nil)
		if err != nil || string(out) != in {
			t.Errorf("out = %s, err = %v", out, err)
		}
	})
	t.Run("unnamed and malformed tools are removed", func(t *testing.T) {
		const in = `{"tools":[{"name":"ok"},{"title":"no name"},{"name":7},"str",null,[{"name":"ok"}],{"n\u0061me":"ok"}]}`
		out, err := FilterToolsList(json.RawMessage(in), allowOnly("ok", "dup"))
		if err != nil || string(out) != `{"tools":[{"name":"ok"},{"n\u0061me":"ok"}]}` {
			t.Errorf("out = %s, err = %v", out, err)
		}
	})
	t.Run("allow sees decoded names", func(t *testing.T) {
		var seen []string
		_, err := FilterToolsList(json.RawMessage(`{"tools":[{"name":"a\"b"},{"name":"\u00e9"}]}`), func(n string) bool { seen = append(seen, n); return true })
		if err != nil || len(seen) != 2 || seen[0] != `a"b` || seen[1] != "é" {
			t.Errorf("seen = %q, err = %v", seen, err)
		}
	})

	errTests := []struct {
		name, in string
		want     error
	}{
		{"not json", `{"tools":[`, ErrParse},
		{"not object", `[{"name":"a"}]`, ErrNotObject},
		{"tools not array", `{"tools":{"name":"a"}}`, ErrInvalidToolsList},
		{"tools string", `{"tools":"a"}`, ErrInvalidToolsList},
		{"tools twice", `{"tools":[],"tools":[{"name":"secret"}]}`, ErrAmbiguous},
		{"tools in another case", `{"TOOLS":[{"name":"secret"}]}`, ErrAmbiguous},
		{"name in another case only", `{"tools":[{"name":"ok"},{"Name":"secret"}]}`, ErrAmbiguous},
		{"name in a folded case only", `{"tools":[{"nameſ":"x","NAMe":"secret"}]}`, ErrAmbiguous},
		{"name twice", `{"tools":[{"name":"ok","name":"secret"}]}`, ErrAmbiguous},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := FilterToolsList(json.RawMessage(tt.in), allowOnly())
			if !errors.Is(err, tt.want) || out != nil {
				t.Errorf("out = %s, err = %v, want %v", out, err, tt.want)
			}
		})
	}
	for _, in := range []string{`{}`, `{"tools":null}`, `{"nextCursor":"x"}`} {
		out, err := FilterToolsList(json.RawMessage(in), allowOnly())
		if err != nil || string(out) != in {
			t.Errorf("%s: out = %s, err = %v", in, out, err)
		}
	}
}

func TestFilterResponseBody(t *testing.T) {
	ids := map[string]string{
		IDKey(json.RawMessage(`1`)):     MethodToolsList,
		IDKey(json.RawMessage(`"two"`)): MethodToolsCall,
		IDKey(json.RawMessage(`3`)):     "resources/list",
		IDKey(json.RawMessage(`4`)):     MethodToolsList,
	}
	allow := allowOnly("a")

	t.Run("single", func(t *testing.T) {
		in := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}],"nextCursor":"n"},"x":1}`
		want := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"nextCursor":"n"},"x":1}`
		out, err := FilterResponseBody([]byte(in), ids, allow)
		if err != nil || string(out) != want {
			t.Errorf("got %s, %v", out, err)
		}
	})
	t.Run("id matched by value", func(t *testing.T) {
		in := `{"jsonrpc":"2.0","id":1.0,"result":{"tools":[{"name":"b"}]}}`
		out, err := FilterResponseBody([]byte(in), ids, allow)
		if err != nil || string(out) != `{"jsonrpc":"2.0","id":1.0,"result":{"tools":[]}}` {
			t.Errorf("got %s, %v", out, err)
		}
	})
	t.Run("batch", func(t *testing.T) {
		in := "[ {\"jsonrpc\":\"2.0\",\"id\":\"two\",\"result\":{\"content\":[],\"tools\":[{\"name\":\"b\"}]}},\n" +
			" {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{ \"tools\" : [ {\"name\":\"b\"}, {\"name\":\"a\",\"z\":[1]} ] }} ,\n" +
			" {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":[{\"name\":\"b\"}]}},\n" +
			" {\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-1,\"message\":\"m\"}},\n" +
			" {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"},\n" +
			" {\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{\"tools\":[{\"name\":\"b\"},{\"name\":\"a\"}]}},\n" +
			" {\"jsonrpc\":\"2.0\",\"id\":98,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}} ]"
		// The answers to "two" and 3 look like tool lists: filtered too.
		want := "[ {\"jsonrpc\":\"2.0\",\"id\":\"two\",\"result\":{\"content\":[],\"tools\":[]}},\n" +
			" {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{ \"tools\" : [{\"name\":\"a\",\"z\":[1]}] }} ,\n" +
			" {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":[]}},\n" +
			" {\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-1,\"message\":\"m\"}},\n" +
			" {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"},\n" +
			" {\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{\"tools\":[{\"name\":\"a\"}]}},\n" +
			" {\"jsonrpc\":\"2.0\",\"id\":98,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}} ]"
		out, err := FilterResponseBody([]byte(in), ids, allow)
		if err != nil || string(out) != want {
			t.Errorf("got\n%s\nwant\n%s\nerr %v", out, want, err)
		}
	})
	t.Run("untouched body is returned as is", func(t *testing.T) {
		in := []byte(`[{"jsonrpc":"2.0","id":3,"result":{"tools":["b"]}},{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}], "x" : "\u00e9"}}]`)
		out, err := FilterResponseBody(in, ids, allow)
		if err != nil || !sameArray(out, in) {
			t.Errorf("got %s, %v", out, err)
		}
	})
	// An answer to another request is filtered only when it looks like a
	// tools/list result; any other "tools" member is left alone.
	t.Run("other method", func(t *testing.T) {
		for _, res := range []string{
			`{"tools":["b","c"]}`,
			`{"tools":[1,{"title":"b"},{"name":7}]}`,
			`{"tools":{"name":"b"}}`,
			`{"tools":"b"}`,
			`{"tools":null}`,
			`{"tools":[]}`,
			`{"x":{"tools":[{"name":"b"}]}}`,
			`[{"tools":[{"name":"b"}]}]`,
		} {
			in := []byte(`{"jsonrpc":"2.0","id":3,"result":` + res + `}`)
			if out, err := FilterResponseBody(in, ids, allow); err != nil || !sameArray(out, in) {
				t.Errorf("%s: got %s, %v", res, out, err)
			}
		}
		for res, want := range map[string]string{
			`{"tools":["junk",{"name":"b"},{"name":"a"}],"nextCursor":"n"}`: `{"tools":[{"name":"a"}],"nextCursor":"n"}`,
			`{"tools":[{"name":"b","inputSchema":{}}]}`:                     `{"tools":[]}`,
		} {
			out, err := FilterResponseBody([]byte(`{"jsonrpc":"2.0","id":3,"result":`+res+`}`), ids, allow)
			if err != nil || string(out) != `{"jsonrpc":"2.0","id":3,"result":`+want+`}` {
				t.Errorf("%s: got %s, %v", res, out, err)
			}
		}
		// "tools" twice or in another case: the filter cannot tell which
		// one a client reads.
		for _, res := range []string{`{"tools":[],"tools":[{"name":"b"}]}`, `{"Tools":[{"name":"b"}]}`, `{"tools":[{"name":"b","name":"c"}]}`} {
			if out, err := FilterResponseBody([]byte(`{"jsonrpc":"2.0","id":3,"result":`+res+`}`), ids, allow); !errors.Is(err, ErrAmbiguous) {
				t.Errorf("%s: got %s, %v", res, out, err)
			}
		}
	})
	// An id that a tools/list and another request shared (RequestMethods
	// maps it to "") is an unknown id: every "tools" member is filtered.
	t.Run("shared id", func(t *testing.T) {
		msgs, _, err := ParseMessages([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`))
		if err != nil {
			t.Fatal(err)
		}
		shared := RequestMethods(msgs)
		out, err := FilterResponseBody([]byte(`[{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}},{"jsonrpc":"2.0","id":1,"result":{}}]`), shared, allow)
		if err != nil || string(out) != `[{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}]}},{"jsonrpc":"2.0","id":1,"result":{}}]` {
			t.Errorf("got %s, %v", out, err)
		}
		if _, err := FilterResponseBody([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":"all"}}`), shared, allow); !errors.Is(err, ErrInvalidToolsList) {
			t.Errorf("malformed tools under a shared id: %v", err)
		}
	})
	t.Run("nil allow", func(t *testing.T) {
		in := []byte(`not even json`)
		out, err := FilterResponseBody(in, ids, nil)
		if err != nil || !sameArray(out, in) {
			t.Errorf("got %s, %v", out, err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for in, want := range map[string]error{
			``:    ErrEmpty,
			`{`:   ErrParse,
			`[]`:  ErrEmptyBatch,
			`[1]`: ErrNotObject,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":"x"}}`:            ErrInvalidToolsList,
			`{"jsonrpc":"2.0","id":1,"result":[{"name":"b"}]}`:           ErrNotObject,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"tools":[1]}}`: ErrAmbiguous,
		} {
			if out, err := FilterResponseBody([]byte(in), ids, allow); !errors.Is(err, want) || out != nil {
				t.Errorf("%q: got %s, %v; want %v", in, out, err, want)
			}
		}
	})
}
