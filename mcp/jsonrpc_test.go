package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseMessagesMalformed(t *testing.T) {
	deep := func(n int) string {
		return `{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	}
	tests := []struct {
		name   string
		body   string
		want   error
		index  int // for *MessageError
		member string
	}{
		{"empty", "", ErrEmpty, 0, ""},
		{"whitespace", " \r\n\t", ErrEmpty, 0, ""},
		{"not json", "hello", ErrParse, 0, ""},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"tools/list"`, ErrParse, 0, ""},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"a"} x`, ErrParse, 0, ""},
		{"two values", `{"jsonrpc":"2.0","id":1,"method":"a"}{"jsonrpc":"2.0","id":2,"method":"a"}`, ErrParse, 0, ""},
		{"number", "42", ErrNotObject, -1, ""},
		{"string", `"tools/call"`, ErrNotObject, -1, ""},
		{"null", "null", ErrNotObject, -1, ""},
		{"empty batch", "[]", ErrEmptyBatch, 0, ""},
		{"empty batch spaced", " [ ] ", ErrEmptyBatch, 0, ""},
		{"batch of numbers", "[1,2]", ErrNotObject, 0, ""},
		{"batch with array", `[{"jsonrpc":"2.0","method":"a"},[]]`, ErrNotObject, 1, ""},
		{"batch with null", `[{"jsonrpc":"2.0","method":"a"},null]`, ErrNotObject, 1, ""},
		{"no version", `{"id":1,"method":"a"}`, ErrInvalidMessage, -1, "jsonrpc"},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"a"}`, ErrInvalidMessage, -1, "jsonrpc"},
		{"version number", `{"jsonrpc":2.0,"id":1,"method":"a"}`, ErrInvalidMessage, -1, "jsonrpc"},
		{"method number", `{"jsonrpc":"2.0","id":1,"method":1}`, ErrInvalidMessage, -1, "method"},
		{"method null", `{"jsonrpc":"2.0","id":1,"method":null}`, ErrInvalidMessage, -1, "method"},
		{"method empty", `{"jsonrpc":"2.0","id":1,"method":""}`, ErrInvalidMessage, -1, "method"},
		{"method twice", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`, ErrInvalidMessage, -1, "method"},
		{"method twice escaped", `{"jsonrpc":"2.0","id":1,"method":"a","m\u0065thod":"b"}`, ErrInvalidMessage, -1, "method"},
		{"params twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}`, ErrInvalidMessage, -1, "params"},
		{"id object", `{"jsonrpc":"2.0","id":{},"method":"a"}`, ErrInvalidMessage, -1, "id"},
		{"id bool", `{"jsonrpc":"2.0","id":true,"method":"a"}`, ErrInvalidMessage, -1, "id"},
		{"params string", `{"jsonrpc":"2.0","id":1,"method":"a","params":"x"}`, ErrInvalidMessage, -1, "params"},
		{"method with result", `{"jsonrpc":"2.0","id":1,"method":"a","result":{}}`, ErrInvalidMessage, -1, ""},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, ErrInvalidMessage, -1, ""},
		{"response with both", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, ErrInvalidMessage, -1, ""},
		{"neither", `{"jsonrpc":"2.0","id":1}`, ErrInvalidMessage, -1, ""},
		{"case-folded method is not method", `{"jsonrpc":"2.0","id":1,"Method":"tools/call"}`, ErrInvalidMessage, -1, ""},
		{"error not object", `{"jsonrpc":"2.0","id":1,"error":"boom"}`, ErrInvalidMessage, -1, "error"},
		{"tools/call no params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, ErrInvalidParams, -1, "params"},
		{"tools/call params null", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`, ErrInvalidParams, -1, "params"},
		{"tools/call params array", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["a"]}`, ErrInvalidParams, -1, "params"},
		{"tools/call name number", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}`, ErrInvalidParams, -1, "params.name"},
		{"tools/call name missing", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`, ErrInvalidParams, -1, "params.name"},
		{"tools/call name twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`, ErrInvalidParams, -1, "params.name"},
		{"tools/call name bad utf8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\xffb\"}}", ErrInvalidParams, -1, "params.name"},
		{"tools/call escaped method", `{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{}}`, ErrInvalidParams, -1, "params.name"},
		{"batch element bad", `[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}]`, ErrInvalidParams, 1, "params.name"},
		{"nesting over MaxDepth", deep(MaxDepth), ErrTooDeep, 0, ""},
		{"huge nesting", deep(100000), ErrParse, 0, ""}, // encoding/json stops at 10000
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, _, err := ParseMessages([]byte(tt.body))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if msgs != nil {
				t.Errorf("msgs = %v, want nil on error", msgs)
			}
			var me *MessageError
			if errors.As(err, &me) {
				if me.Index != tt.index || me.Member != tt.member {
					t.Errorf("MessageError{Index: %d, Member: %q}, want {%d, %q}", me.Index, me.Member, tt.index, tt.member)
				}
			} else if tt.member != "" || tt.index != 0 {
				t.Errorf("err %v is not a *MessageError", err)
			}
		})
	}
}

func TestParseMessagesDepthLimit(t *testing.T) {
	// The message object is level 1 and params level 2, so MaxDepth-1
	// nested arrays in params reach exactly MaxDepth.
	n := MaxDepth - 1
	body := `{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	if _, _, err := ParseMessages([]byte(body)); err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
	batch := "[" + body + "]"
	if _, _, err := ParseMessages([]byte(batch)); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("same message in a batch: err = %v, want ErrTooDeep", err)
	}
}

func TestParseMessagesValid(t *testing.T) {
	body := ` [
		{"jsonrpc":"2.0","id":"a1","method":"tools/call","params":{"name":"checkout","arguments":{"n":[1,{"x":"}"}]}},"extra":true},
		{"jsonrpc":"2.0","method":"notifications/initialized"},
		{"jsonrpc":"2.0","id":2,"method":"tools/list","params":null},
		{"jsonrpc":"2.0","id":3,"result":{"tools":[]}},
		{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}},
		{"jsonrpc":"2.0","id":4,"method":"tools\/call","params":{"n\u0061me":"es\"caped"}}
	]`
	msgs, batch, err := ParseMessages([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if !batch || len(msgs) != 6 {
		t.Fatalf("batch = %v, len = %d", batch, len(msgs))
	}
	m := msgs[0]
	if string(m.ID) != `"a1"` || m.Method != "tools/call" || !IsRequest(m) || IsNotification(m) || IsResponse(m) {
		t.Errorf("msg 0 = %+v", m)
	}
	if name, ok := ToolCallName(m); !ok || name != "checkout" {
		t.Errorf("ToolCallName = %q, %v", name, ok)
	}
	if !strings.HasPrefix(string(m.Raw), `{"jsonrpc"`) || !strings.HasSuffix(string(m.Raw), `"extra":true}`) {
		t.Errorf("Raw = %s", m.Raw)
	}
	if !json.Valid(m.Params) || !strings.HasPrefix(string(m.Params), `{"name"`) {
		t.Errorf("Params = %s", m.Params)
	}
	if m := msgs[1]; !IsNotification(m) || m.ID != nil || m.Params != nil {
		t.Errorf("msg 1 = %+v", m)
	}
	if _, ok := ToolCallName(msgs[1]); ok {
		t.Error("ToolCallName of a notification")
	}
	if m := msgs[2]; m.Params != nil || m.Method != "tools/list" {
		t.Errorf("params null: %+v", m)
	}
	if m := msgs[3]; !IsResponse(m) || string(m.Result) != `{"tools":[]}` || m.Error != nil {
		t.Errorf("msg 3 = %+v", m)
	}
	if m := msgs[4]; !IsResponse(m) || string(m.ID) != "null" || m.Result != nil || !strings.Contains(string(m.Error), "-32700") {
		t.Errorf("msg 4 = %+v", m)
	}
	if name, ok := ToolCallName(msgs[4]); ok || name != "" {
		t.Error("ToolCallName of a response")
	}
	if name, ok := ToolCallName(msgs[5]); !ok || name != `es"caped` || msgs[5].Method != "tools/call" {
		t.Errorf("escaped: %q %v %q", name, ok, msgs[5].Method)
	}

	single := []byte(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	msgs, batch, err = ParseMessages(single)
	if err != nil || batch || len(msgs) != 1 || msgs[0].Method != "ping" || string(msgs[0].Raw) != string(single) {
		t.Fatalf("single: %v %v %+v", err, batch, msgs)
	}
}

func TestToolCallNameBuiltMessage(t *testing.T) {
	// Messages built by a caller may hold anything: never panic, never
	// accept what is not an object with a string name.
	for _, p := range []string{``, `{`, `{"name":`, `{"name":"a`, `[]`, `{"name":"a","name":"a"}`, `{"name" "a"}`} {
		if name, ok := ToolCallName(Message{Method: MethodToolsCall, Params: json.RawMessage(p)}); ok {
			t.Errorf("params %q: got %q", p, name)
		}
	}
	if name, ok := ToolCallName(Message{Method: MethodToolsCall, Params: json.RawMessage(` {"name":"x"} `)}); !ok || name != "x" {
		t.Errorf("got %q %v", name, ok)
	}
}

func TestIDKey(t *testing.T) {
	same := [][2]string{
		{`1`, `1.0`},
		{`1`, ` 1 `},
		{`100`, `1e2`},
		{`0`, `-0`},
		{`"a"`, `"\u0061"`},
		{`null`, ` null`},
	}
	for _, p := range same {
		if IDKey(json.RawMessage(p[0])) != IDKey(json.RawMessage(p[1])) {
			t.Errorf("IDKey(%s) != IDKey(%s)", p[0], p[1])
		}
	}
	differ := [][2]string{
		{`1`, `"1"`},
		{`1`, `2`},
		{`"a"`, `"A"`},
		{`null`, `"null"`},
		{`1.5`, `1`},
	}
	for _, p := range differ {
		if IDKey(json.RawMessage(p[0])) == IDKey(json.RawMessage(p[1])) {
			t.Errorf("IDKey(%s) == IDKey(%s)", p[0], p[1])
		}
	}
	if IDKey(nil) != "" {
		t.Error("IDKey(nil) not empty")
	}
}

func TestRequestMethods(t *testing.T) {
	msgs, _, err := ParseMessages([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t"}},{"jsonrpc":"2.0","id":9,"result":{}}]`))
	if err != nil {
		t.Fatal(err)
	}
	got := RequestMethods(msgs)
	if len(got) != 2 || got[IDKey(json.RawMessage(`1`))] != "tools/list" || got[IDKey(json.RawMessage(`"x"`))] != "tools/call" {
		t.Errorf("RequestMethods = %v", got)
	}
}

// TestRequestMethodsRepeatedID: an id shared by requests of different
// methods maps to "", never to the last one's method.
func TestRequestMethodsRepeatedID(t *testing.T) {
	msgs, _, err := ParseMessages([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":1.0,"method":"ping"},` +
		`{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","id":"\u0061","method":"ping"}]`))
	if err != nil {
		t.Fatal(err)
	}
	got := RequestMethods(msgs)
	if m, ok := got[IDKey(json.RawMessage(`1`))]; !ok || m != "" {
		t.Errorf("id 1 maps to %q (%t), want \"\"", m, ok)
	}
	if m := got[IDKey(json.RawMessage(`"a"`))]; m != "ping" {
		t.Errorf(`id "a" maps to %q, want ping`, m)
	}
}

func TestCheckUniqueIDs(t *testing.T) {
	const (
		list = `{"jsonrpc":"2.0","id":%s,"method":"tools/list"}`
		ping = `{"jsonrpc":"2.0","id":%s,"method":"ping"}`
	)
	batch := func(a, b string) string {
		return "[" + fmt.Sprintf(list, a) + "," + fmt.Sprintf(ping, b) + "]"
	}
	dup := [][2]string{
		{`1`, `1`},
		{`1`, `1.0`},
		{`1`, `1e0`},
		{`0`, `-0`},
		{`9007199254740993`, `9007199254740992`}, // one float64
		{`1e400`, `2e400`},                       // both +Inf
		{`"a"`, `"\u0061"`},
		{`1`, `"1"`},
		{`"1.0"`, `1`},
		{`null`, `null`},
	}
	for _, p := range dup {
		msgs, _, err := ParseMessages([]byte(batch(p[0], p[1])))
		if err != nil {
			t.Fatal(err)
		}
		err = CheckUniqueIDs(msgs)
		var me *MessageError
		if !errors.Is(err, ErrDuplicateID) || !errors.As(err, &me) || me.Index != 1 || me.Member != "id" || ErrorCode(err) != CodeInvalidRequest {
			t.Errorf("ids %s and %s: %v", p[0], p[1], err)
		}
	}
	distinct := [][2]string{
		{`1`, `2`},
		{`"a"`, `"A"`},
		{`null`, `"null"`},
		{`1.5`, `1`},
		{`"x1"`, `1`},
	}
	for _, p := range distinct {
		msgs, _, err := ParseMessages([]byte(batch(p[0], p[1])))
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckUniqueIDs(msgs); err != nil {
			t.Errorf("ids %s and %s: %v", p[0], p[1], err)
		}
	}
	// Notifications have no id, and a client's responses carry the
	// server's ids: neither is compared with the requests' ids.
	msgs, _, err := ParseMessages([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1,"result":{}},` +
		`{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckUniqueIDs(msgs); err != nil {
		t.Error(err)
	}
}

func TestErrorCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{ErrEmpty, CodeParseError},
		{ErrParse, CodeParseError},
		{&MessageError{Index: 2, Err: ErrNotObject}, CodeInvalidRequest},
		{ErrEmptyBatch, CodeInvalidRequest},
		{ErrTooDeep, CodeInvalidRequest},
		{&MessageError{Index: -1, Member: "method", Err: ErrInvalidMessage}, CodeInvalidRequest},
		{&MessageError{Index: -1, Member: "params.name", Err: ErrInvalidParams}, CodeInvalidParams},
		{&MessageError{Index: 1, Member: "id", Err: ErrDuplicateID}, CodeInvalidRequest},
		{errors.New("other"), CodeInternalError},
	}
	for _, tt := range tests {
		if got := ErrorCode(tt.err); got != tt.want {
			t.Errorf("ErrorCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	me := &MessageError{Index: 3, Member: "id", Err: ErrInvalidMessage}
	if s := me.Error(); !strings.Contains(s, "batch element 3") || !strings.Contains(s, "member id") {
		t.Errorf("Error() = %q", s)
	}
}
