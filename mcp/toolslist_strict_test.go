package mcp

import (
	"errors"
	"testing"
)

// TestFilterRefusesSmuggledLists: a tools/list answer that a client folding
// case or keeping the last repeat reads as another list than the filter is
// refused (ErrAmbiguous, withheld by the edge), whatever request id it
// carries. encoding/json reads each of these as a list
// holding "b".
func TestFilterRefusesSmuggledLists(t *testing.T) {
	allow := func(n string) bool { return n == "a" }
	results := []string{
		`{"Tools":[{"name":"b"}]}`,
		`{"TOOLS":[{"name":"b"}]}`,
		`{"tools":[{"name":"a"}],"TOOLS":[{"name":"b"}]}`,
		`{"tools":[],"Tools":[{"name":"b"}]}`,
		`{"toolſ":[{"name":"b"}]}`,
		`{"tools":[{"name":"a"}],"toolſ":[{"name":"b"}]}`,
		`{"tools":[{"name":"a"}],"tools":[{"name":"b"}]}`,
		`{"tools":[{"name":"a","Name":"b"}]}`,
		`{"tools":[{"name":"a","nAme":"b"}]}`,
		`{"tools":[{"name":"a","name":"b"}]}`,
		`{"tools":[{"name":"a","na\u006de":"b"}]}`,
		`{"tools":[{"name":"a"}],"t\u006fols":[{"name":"b"}]}`,
	}
	for _, ids := range []map[string]string{
		{IDKey([]byte("1")): MethodToolsList},
		nil, // a resumed stream
		{IDKey([]byte("1")): "ping"},
	} {
		for _, res := range results {
			for _, body := range []string{
				`{"jsonrpc":"2.0","id":1,"result":` + res + `}`,
				`[{"jsonrpc":"2.0","id":1,"result":` + res + `}]`,
			} {
				out, _, err := FilterResponseBodyRead(Era2025, []byte(body), ids, allow)
				if !errors.Is(err, ErrAmbiguous) || out != nil {
					t.Errorf("ids %v, %s: got %s, %v; want ErrAmbiguous", ids, body, out, err)
				}
			}
		}
	}
	// A JSON-RPC member in another case on a tools/list answer.
	ids := map[string]string{IDKey([]byte("1")): MethodToolsList}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"Result":{"tools":[{"name":"b"}]}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"},"Result":{"tools":[{"name":"b"}]}}`,
	} {
		if out, _, err := FilterResponseBodyRead(Era2025, []byte(body), ids, allow); !errors.Is(err, ErrAmbiguous) {
			t.Errorf("%s: got %s, %v; want ErrAmbiguous", body, out, err)
		}
	}
	// The clean answer is still filtered, and a clean answer with nothing
	// removed is returned as is.
	out, read, err := FilterResponseBodyRead(Era2025, []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`), ids, allow)
	if err != nil || string(out) != `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}]}}` || read {
		t.Errorf("clean: got %s, %v, %v", out, read, err)
	}
}

// TestFilterRefusesAmbiguousMessages: whatever the request was (none, on a
// resumed stream; a ping; a tools/call; a tools/list), an answer whose
// JSON-RPC members a lenient client reads otherwise than the filter is
// refused (ErrAmbiguous, withheld by the edge), and so is a tool named by
// a case variant of "name" alone. encoding/json reads a
// tool "secret" in each.
func TestFilterRefusesAmbiguousMessages(t *testing.T) {
	allow := func(n string) bool { return n == "a" }
	const secret = `{"tools":[{"name":"secret"}]}`
	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"result":{},"Result":` + secret + `}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]},"RESULT":` + secret + `}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"reſult":` + secret + `}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"resul\u0054":` + secret + `}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"},"Result":` + secret + `}`,
		`{"jsonrpc":"2.0","id":1,"Result":` + secret + `}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"result":` + secret + `}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"},"result":` + secret + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","result":` + secret + `}`,
		`{"jsonrpc":"2.0","id":1,"Id":2,"result":` + secret + `}`,
		`{"jsonrpc":"2.0","JSONRPC":"1.0","id":1,"result":` + secret + `}`,
		`{"Jsonrpc":"2.0","id":1,"result":` + secret + `}`,
		`{"jsonrpc":"2.0","ID":1,"result":` + secret + `}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"Name":"secret"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"NAME":"secret"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"nAme":"secret","title":"t"}]}}`,
	}
	for _, ids := range []map[string]string{
		nil, // a GET stream or a resumed one
		{IDKey([]byte("1")): "ping"},
		{IDKey([]byte("1")): MethodToolsCall},
		{IDKey([]byte("1")): MethodToolsList},
		{IDKey([]byte("9")): "ping"}, // the answer to a request of another body
	} {
		for _, m := range msgs {
			for _, body := range []string{m, `[` + m + `]`, `[{"jsonrpc":"2.0","id":5,"result":{}},` + m + `]`} {
				out, _, err := FilterResponseBodyRead(Era2025, []byte(body), ids, allow)
				if !errors.Is(err, ErrAmbiguous) || out != nil {
					t.Errorf("ids %v, %s: got %s, %v; want ErrAmbiguous", ids, body, out, err)
				}
			}
		}
	}
}

// TestFilterPassesCleanAnswers: the strict reading refuses no
// ordinary answer: case variants below the message's own members, in
// values, or of members no client reads as JSON-RPC pass byte for byte,
// and an answer that is no JSON-RPC is no ErrAmbiguous (the edge lets it
// through where it only sniffs).
func TestFilterPassesCleanAnswers(t *testing.T) {
	allow := func(n string) bool { return n == "a" }
	ids := map[string]string{IDKey([]byte("1")): MethodToolsCall}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Result Name ID"}],"Result":{"Tools":1}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"Error":{"Name":"x"},"ID":2}}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Result","data":{"Result":1}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":{"Name":"not a list"}}}`,
		`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"Name"}}]`,
	} {
		out, _, err := FilterResponseBodyRead(Era2025, []byte(body), ids, allow)
		if err != nil || string(out) != body {
			t.Errorf("%s: got %s, %v; want it unchanged", body, out, err)
		}
	}
	for _, body := range []string{`{"status":"ok"}`, `{"jsonrpc":"2.0","id":1}`, `[1]`, `{"jsonrpc":"1.0","id":1,"result":{}}`} {
		if _, _, err := FilterResponseBodyRead(Era2025, []byte(body), ids, allow); err == nil || errors.Is(err, ErrAmbiguous) {
			t.Errorf("%s: got %v; want a parse error other than ErrAmbiguous", body, err)
		}
	}
}
