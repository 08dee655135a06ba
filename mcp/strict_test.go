package mcp

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestParseStrict: bodies an exact reader and a case-insensitive decoder
// read differently are refused with ErrAmbiguous (-32600) at every level
// the edge reads; others read as ParseMessages reads them.
func TestParseStrict(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       error
	}{
		{"plain call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"A":1,"b":2}}}`, nil},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`, nil},
		{"Method beside method", `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"x"}}`, ErrAmbiguous},
		{"METHOD first", `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","method":"ping"}`, ErrAmbiguous},
		{"method twice", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}`, ErrAmbiguous},
		{"escaped fold", `{"jsonrpc":"2.0","id":1,"method":"ping","metho\u0044":"tools/call"}`, ErrAmbiguous},
		{"lone Params", `{"jsonrpc":"2.0","id":1,"method":"ping","Params":{}}`, ErrAmbiguous},
		{"Id twin", `{"jsonrpc":"2.0","id":1,"Id":2,"method":"ping"}`, ErrAmbiguous},
		{"long s params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"paramſ":{"name":"b"}}`, ErrAmbiguous},
		{"Name in params", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"a","Name":"b"}}`, ErrAmbiguous},
		{"lone _Meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_Meta":{}}}`, ErrAmbiguous},
		{"_meta twins", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"a":1},"_META":{}}}`, ErrAmbiguous},
		{"twins inside _meta", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"k":1,"K":2}}}`, ErrAmbiguous},
		{"twins in arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1,"x":2}}}`, ErrAmbiguous},
		{"in a batch element", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping","Method":"tools/call"}]`, ErrAmbiguous},
		{"not JSON", `{"jsonrpc":"2.0",`, ErrParse},
		{"not JSON-RPC", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, ErrInvalidMessage},
		{"empty", ``, ErrEmpty},
	} {
		msgs, _, err := ParseStrict([]byte(c.body))
		if !errors.Is(err, c.want) || (err == nil) != (msgs != nil) {
			t.Errorf("%s: %d messages, error %v, want %v", c.name, len(msgs), err, c.want)
		}
		if errors.Is(err, ErrAmbiguous) && ErrorCode(err) != CodeInvalidRequest {
			t.Errorf("%s: code %d", c.name, ErrorCode(err))
		}
	}
}

// FuzzParseStrict: what ParseStrict accepts, encoding/json (which matches
// member names case-insensitively and keeps the last repeat) reads the
// same way: the same method, id and tool name.
func FuzzParseStrict(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b","Name":"c"}}]`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{},"_\u004deta":{}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, _, err := ParseStrict(body)
		if err != nil {
			if msgs != nil {
				t.Fatal("messages with an error")
			}
			return
		}
		for _, m := range msgs {
			var g struct {
				ID     json.RawMessage
				Method string
				Params struct{ Name string }
			}
			if json.Unmarshal(m.Raw, &g) != nil {
				continue // a shape encoding/json will not put in this struct
			}
			if g.Method != m.Method || string(g.ID) != string(m.ID) && m.ID != nil {
				t.Fatalf("edge read method %q id %s, encoding/json %q %s", m.Method, m.ID, g.Method, g.ID)
			}
			if name, ok := ToolCallName(m); ok && name != g.Params.Name {
				t.Fatalf("edge read tool %q, encoding/json %q", name, g.Params.Name)
			}
		}
	})
}

// TestRequestAndResponseIsAmbiguous: a message with a method and a result
// or error is refused by both readings as ErrRequestAndResponse, which is
// an invalid message (-32600) and ambiguous (some SDKs run it as a
// request), alone or in a batch; a response with both result and error is
// only invalid.
func TestRequestAndResponseIsAmbiguous(t *testing.T) {
	mixed := []string{
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","result":{},"params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","id":6,"error":{"code":1,"message":"m"},"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/x","result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping","result":{}}]`,
	}
	for _, body := range mixed {
		for name, parse := range map[string]func([]byte) ([]Message, bool, error){"ParseMessages": ParseMessages, "ParseStrict": ParseStrict} {
			_, _, err := parse([]byte(body))
			if !errors.Is(err, ErrRequestAndResponse) || !errors.Is(err, ErrAmbiguous) || !errors.Is(err, ErrInvalidMessage) || ErrorCode(err) != CodeInvalidRequest {
				t.Errorf("%s(%s) = %v, want ErrRequestAndResponse (ambiguous, invalid, -32600)", name, body, err)
			}
		}
	}
	_, _, err := ParseStrict([]byte(`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`))
	if !errors.Is(err, ErrInvalidMessage) || errors.Is(err, ErrAmbiguous) {
		t.Errorf("result and error: %v, want ErrInvalidMessage only", err)
	}
}
