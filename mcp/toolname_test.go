package mcp

import "testing"

// toolNameBodies are tools/call bodies whose name a parse reads: plain,
// escaped, non-ASCII, in a batch, with other members around it.
var toolNameBodies = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\u0065cho","arguments":{"name":"other"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{},"name":"d\u00e9j\u00e0"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":""}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\"b\\c"}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"one"}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"two"}},{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"not a call"}}`,
}

// checkToolNames fails when ToolCallName of a parsed message answers
// otherwise than reading its params again.
func checkToolNames(t *testing.T, body []byte) {
	t.Helper()
	for _, parse := range []func([]byte) ([]Message, bool, error){ParseMessages, ParseStrict} {
		msgs, _, err := parse(body)
		if err != nil {
			continue
		}
		for _, m := range msgs {
			got, ok := ToolCallName(m)
			want, wantOK := "", false
			if m.Method == MethodToolsCall {
				want, wantOK = toolCallName(m.Params)
			}
			if got != want || ok != wantOK {
				t.Fatalf("%s: ToolCallName = %q %v, params read again: %q %v", body, got, ok, want, wantOK)
			}
		}
	}
}

func TestToolCallNameOfParsed(t *testing.T) {
	for _, b := range toolNameBodies {
		checkToolNames(t, []byte(b))
	}
	msgs, _, err := ParseMessages([]byte(toolNameBodies[0]))
	if err != nil {
		t.Fatal(err)
	}
	// Params replaced after the parse are read, not the name parsed.
	m := msgs[0]
	m.Params = []byte(`{"name":"other"}`)
	if name, _ := ToolCallName(m); name != "other" {
		t.Fatalf("ToolCallName after Params changed = %q, want other", name)
	}
	// A message built by hand is read.
	if name, ok := ToolCallName(Message{Method: MethodToolsCall, Params: []byte(`{"name":"built"}`)}); name != "built" || !ok {
		t.Fatalf("ToolCallName of a built message = %q %v", name, ok)
	}
}

func FuzzToolCallNameOfParsed(f *testing.F) {
	for _, b := range toolNameBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(checkToolNames)
}
