package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func FuzzParseMessages(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"checkout","arguments":{"a":[1,{"b":"}"}]}}}`,
		`[{"jsonrpc":"2.0","id":"x","method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a"}]}}`,
		`[{"jsonrpc":"2.0","id":3,"result":{"tools":[1,{"name":"b"}]}},{"jsonrpc":"2.0","id":3.0,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools\/call","params":{"n\u0061me":"a\"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`,
		`{"jsonrpc":"2.0","id":1,"Method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","result":{},"params":{"name":"x"}}`,
		`[]`, `[1]`, ``, `{`, `null`, `[[[[[[]]]]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, batch, err := ParseMessages(body)
		// The verdict alone (CheckResponseBody on answers that cannot
		// hold anything it guards) is the same, error for error.
		if cerr := checkMessages(body); fmt.Sprint(cerr) != fmt.Sprint(err) {
			t.Fatalf("checkMessages: %v, ParseMessages: %v", cerr, err)
		}
		if err != nil {
			if msgs != nil {
				t.Fatal("messages with an error")
			}
			if c := ErrorCode(err); c != CodeParseError && c != CodeInvalidRequest && c != CodeInvalidParams {
				t.Fatalf("error %v maps to %d", err, c)
			}
			// A caller-built message from the same bytes must not panic.
			_, _ = ToolCallName(Message{Method: MethodToolsCall, Params: body})
			return
		}
		if len(msgs) == 0 || (!batch && len(msgs) != 1) {
			t.Fatalf("%d messages, batch %v", len(msgs), batch)
		}
		// encoding/json must agree on every member we read: keys are
		// exact-case in a map, and we rejected duplicates.
		for _, m := range msgs {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(m.Raw, &obj); err != nil {
				t.Fatalf("Raw %q: %v", m.Raw, err)
			}
			var method string
			if raw, ok := obj["method"]; ok {
				if err := json.Unmarshal(raw, &method); err != nil || method != m.Method {
					t.Fatalf("method %q vs %q", method, m.Method)
				}
			} else if m.Method != "" {
				t.Fatalf("method %q from nowhere", m.Method)
			}
			if !IsRequest(m) && !IsNotification(m) && !IsResponse(m) {
				t.Fatalf("message of no kind: %q", m.Raw)
			}
			if name, ok := ToolCallName(m); ok {
				var p struct {
					Name string `json:"name"`
				}
				var params map[string]json.RawMessage
				if err := json.Unmarshal(m.Params, &params); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(params["name"], &p.Name); err != nil || p.Name != name {
					t.Fatalf("name %q vs %q", p.Name, name)
				}
			} else if m.Method == MethodToolsCall {
				t.Fatal("accepted a tools/call without a name")
			}
			if m.Result != nil && !bytes.Equal(m.Raw[m.resultStart:m.resultEnd], m.Result) {
				t.Fatal("result offsets")
			}
		}
		if err := CheckUniqueIDs(msgs); err != nil && ErrorCode(err) != CodeInvalidRequest {
			t.Fatalf("CheckUniqueIDs: %v", err)
		}
		// Every response answers a ping: only lookalike tool lists are
		// filtered, and the output stays valid JSON.
		ids := make(map[string]string)
		for _, m := range msgs {
			ids[IDKey(m.ID)] = "ping"
		}
		if out, err := FilterResponseBody(body, ids, func(n string) bool { return n == "a" }); err == nil && !json.Valid(out) {
			t.Fatalf("filtered %q", out)
		}
	})
}

func FuzzSSERewriter(f *testing.F) {
	for _, s := range sseInputs {
		f.Add([]byte(s), []byte{1, 2, 3})
	}
	f.Add([]byte("data: a\r"), []byte{8})
	f.Add([]byte("data: a\r\n\r\n"), []byte{9, 1})
	f.Add([]byte(": c\r\rdata: x\n\ndata:\n\n"), []byte{0, 4, 0, 2})
	f.Fuzz(func(t *testing.T, input, chunking []byte) {
		var chunks []int
		for _, c := range chunking {
			chunks = append(chunks, int(c%32))
		}
		// Identity reproduces the stream byte for byte, whatever the
		// write boundaries.
		out, err := runSSE(t, input, identity, chunks)
		if err != nil || !bytes.Equal(out, input) {
			t.Fatalf("identity: %q -> %q, %v", input, out, err)
		}
		// A rewrite gives the events a spec client would see, rewritten,
		// and the same bytes for any write boundaries.
		whole, err := runSSE(t, input, wrap, nil)
		if err != nil {
			t.Fatal(err)
		}
		split, err := runSSE(t, input, wrap, chunks)
		if err != nil || !bytes.Equal(split, whole) {
			t.Fatalf("chunked rewrite differs: %q vs %q", split, whole)
		}
		want := parseSSE(input)
		for i := range want {
			if want[i].Data != "" {
				want[i].Data = "<" + want[i].Data + ">"
			}
		}
		if got := parseSSE(whole); !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q (output %q)", got, want, whole)
		}
		// Tiny limits: passthrough still reproduces the input; failing
		// closed writes a prefix of it and reports ErrEventTooLarge.
		out, err = runSSE(t, input, identity, chunks, WithMaxEventSize(7), WithOversizePassthrough())
		if err != nil || !bytes.Equal(out, input) {
			t.Fatalf("passthrough: %q -> %q, %v", input, out, err)
		}
		out, err = runSSE(t, input, identity, chunks, WithMaxEventSize(7))
		if err != nil && !errors.Is(err, ErrEventTooLarge) || !bytes.HasPrefix(input, out) {
			t.Fatalf("fail closed: %q -> %q, %v", input, out, err)
		}
	})
}

func FuzzCheckActions(f *testing.F) {
	for _, a := range []string{sigOK, txOK, authOK,
		`{"_action":"auth_required","provider":"x","authUrl":"https://your-mcp-server.com/a?context_did=x#f"}`,
		`{"_action":"auth_required","provider":"x","authUrl":"https://evil.example\\.your-mcp-server.com/"}`,
		`{"_action":"transaction_proposal","chainId":"0x1","to":"0x0000000000000000000000000000000000000001","data":"0x","value":"0x0"}`,
		`{"_action":"x"}`, `[]`, `null`,
	} {
		f.Add([]byte(withAction(a)), "your-mcp-server.com", "did:key:z6Mk")
	}
	f.Add([]byte(`{"structuredContent":{"_meta":{"handshakeAction":{},"handshakeAction":{}}}}`), "", "")
	f.Fuzz(func(t *testing.T, result []byte, host, did string) {
		opts := ActionOptions{ToolEndpointHost: host, UserDID: did, AllowedHosts: []string{"*.allowed.example"}}
		out, issues, err := CheckActions(result, opts)
		if err != nil {
			if !errors.Is(err, ErrParse) && !errors.Is(err, ErrTooDeep) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %q", out)
		}
		if len(issues) > 0 && !bytes.Equal(out, result) {
			t.Fatal("result with issues was rewritten")
		}
		if len(issues) == 0 {
			// Stable: a second check finds nothing and changes nothing
			// (context_did is replaced, not appended again).
			again, issues2, err := CheckActions(out, opts)
			if err != nil || len(issues2) != 0 || !bytes.Equal(again, out) {
				t.Fatalf("second pass: %q -> %q, %v, %v", out, again, issues2, err)
			}
		}
		enf, enfIssues, err := EnforceActions(result, opts, ActionsEnforce)
		if err != nil || len(enfIssues) != len(issues) || !json.Valid(enf) {
			t.Fatalf("enforce: %q %v %v", enf, enfIssues, err)
		}
		if len(issues) > 0 {
			var r struct {
				IsError           bool `json:"isError"`
				StructuredContent struct {
					Error string `json:"error"`
				} `json:"structuredContent"`
			}
			if err := json.Unmarshal(enf, &r); err != nil || !r.IsError || r.StructuredContent.Error != "handshake_action_rejected" {
				t.Fatalf("enforce kept the result: %q", enf)
			}
		}
		body := append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":`), result...), '}')
		if b, _, err := CheckResponseBody(body, nil, opts, ActionsEnforce); err == nil && !json.Valid(b) {
			t.Fatalf("body %q", b)
		}
	})
}

// FuzzCheckResponseBodyElicit: the elicitation guard never emits invalid
// JSON, and in enforce mode never lets a URL it reported through.
func FuzzCheckResponseBodyElicit(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"inputRequests":{"a":{"method":"elicitation/create","params":{"mode":"url","url":"https://evil.example.net/"}}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"url":"https://a.example.com/","Mode":"x"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"InputRequests":{"a":{"method":"x","Method":"elicitation/create","Params":{"url":"javascript:1"}}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"Method":"elicitation/create","params":{"url":"javascript:1","paramſ":{}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		opts := ActionOptions{ToolEndpointHost: "mcp.example.com", UserDID: "did:web:u", Era: Era2026}
		out, issues, err := CheckResponseBody(body, nil, opts, ActionsEnforce)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %s", out)
		}
		if len(issues) > 0 && bytes.Contains(out, []byte("evil.example.net")) && bytes.Contains(out, []byte(`"elicitation/create"`)) && !bytes.Contains(body, []byte("evil.example.net")) {
			t.Fatalf("introduced a foreign URL: %s", out)
		}
	})
}

// FuzzMayHoldGuarded: the pre-check never skips a body in which a decoder
// that folds member names (encoding/json) sees a member named like
// inputRequests or handshakeAction, or the method elicitation/create.
func FuzzMayHoldGuarded(f *testing.F) {
	f.Add([]byte(`{"result":{"InputRequests":{}}}`))
	f.Add([]byte(`{"method":"elicitation/create"}`))
	f.Add([]byte(`{"result":{"structuredContent":{"_meta":{"handſhakeAction":{}}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var v any
		if json.Unmarshal(body, &v) != nil || mayHoldGuarded(body) {
			return
		}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, e := range v {
					if foldsTo([]byte(k), "inputRequests") || foldsTo([]byte(k), "handshakeAction") {
						t.Fatalf("skipped a body with member %q: %s", k, body)
					}
					walk(e)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			case string:
				if strings.HasPrefix(v, MethodElicit) {
					t.Fatalf("skipped a body with %q: %s", v, body)
				}
			}
		}
		walk(v)
	})
}
