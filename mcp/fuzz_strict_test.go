package mcp

import (
	"encoding/json"
	"errors"
	"testing"
)

// lenientDecode decodes body (a message or a batch) as encoding/json does:
// member names matched in any letter case, the last repeat kept.
func lenientDecode[T any](body []byte) ([]T, bool) {
	var one T
	if err := json.Unmarshal(body, &one); err == nil {
		return []T{one}, true
	}
	var batch []T
	if err := json.Unmarshal(body, &batch); err == nil {
		return batch, true
	}
	return nil, false
}

// FuzzFilterToolsListLenient: whatever tools/list answer the filter passes,
// a client decoding it leniently (encoding/json) finds no tool but the
// allowed one.
func FuzzFilterToolsListLenient(f *testing.F) {
	for _, res := range []string{
		`{"tools":[{"name":"a"},{"name":"b"}]}`,
		`{"Tools":[{"name":"b"}]}`,
		`{"tools":[{"name":"a"}],"TOOLS":[{"name":"b"}]}`,
		`{"tools":[{"name":"a","Name":"b"}]}`,
		`{"toolſ":[{"name":"b"}]}`,
		`{"tools":[{"name":"a","na\u006de":"b"}]}`,
	} {
		f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":` + res + `}`))
	}
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"Result":{"tools":[{"name":"b"}]}}]`))
	// Answers to other requests, and resumed streams.
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{},"Result":{"tools":[{"name":"b"}]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"},"result":{"tools":[{"name":"b"}]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{},"result":{"tools":[{"name":"b"}]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"Name":"b"}]}}`))
	type msg struct {
		JSONRPC string
		ID      json.RawMessage
		Result  struct {
			Tools []struct{ Name string }
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, ids := range []map[string]string{{IDKey([]byte("1")): MethodToolsList}, nil, {IDKey([]byte("1")): "ping"}} {
			out, _, err := FilterResponseBodyRead(Era2025, body, ids, func(n string) bool { return n == "a" })
			switch {
			case err == nil:
			case ids[IDKey([]byte("1"))] == MethodToolsList, errors.Is(err, ErrAmbiguous):
				continue // withheld by the edge
			default:
				// Where no tools/list was asked for, the edge forwards
				// what the filter cannot read: a client must not read
				// a JSON-RPC answer holding a tool there.
				out = body
			}
			msgs, ok := lenientDecode[msg](out)
			if !ok {
				continue
			}
			for _, m := range msgs {
				if err != nil && (m.JSONRPC != "2.0" || len(m.ID) == 0 || string(m.ID) == "null") {
					continue // no JSON-RPC answer to any client
				}
				for _, tool := range m.Result.Tools {
					// An answer to another request may hold a nameless
					// "tool": no client can call it.
					unnamed := tool.Name == "" && ids[IDKey([]byte("1"))] != MethodToolsList
					if tool.Name != "a" && !unnamed {
						t.Fatalf("ids %v: a lenient client sees tool %q in %s", ids, tool.Name, out)
					}
				}
			}
		}
	})
}

// FuzzElicitationErrorLenient: whatever error answer the guard passes in
// enforce mode, a client decoding it leniently finds no URL-mode
// elicitation whose url the guard refuses.
func FuzzElicitationErrorLenient(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32042,"message":"m","data":{"elicitations":[{"mode":"url","elicitationId":"e1","url":"https://evil.example/consent","message":"m"}]}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32042,"message":"m","Data":{"elicitations":[{"url":"https://evil.example/"}]}}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":2,"error":{"code":-32042,"message":"m","data":{"elicitations":[{"mode":"url","URL":"https://evil.example/"}]}}}]`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32042,"message":"m","data":{"elicitations":[{"mode":"url","url":"https://login.example.com/"}]}}}`))
	type msg struct {
		Error struct {
			Data struct {
				Elicitations []struct {
					Mode string
					URL  string
				}
			}
		}
	}
	opts := ActionOptions{ToolEndpointHost: "mcp.example.com", UserDID: "did:web:u", Era: Era2025}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, _, err := CheckResponseBody(body, nil, opts, ActionsEnforce)
		if err != nil {
			return
		}
		msgs, ok := lenientDecode[msg](out)
		if !ok {
			return
		}
		for _, m := range msgs {
			for _, e := range m.Error.Data.Elicitations {
				if (e.Mode == "url" || (e.Mode != "form" && e.URL != "")) && opts.checkAuthURL(e.URL) != nil {
					t.Fatalf("a lenient client sees url %q in %s", e.URL, out)
				}
			}
		}
	})
}
