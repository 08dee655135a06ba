package mcp

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// MethodToolsCall and MethodToolsList are the MCP methods the edge looks at.
const (
	MethodToolsCall = "tools/call"
	MethodToolsList = "tools/list"
)

// Message is one JSON-RPC 2.0 message as received. The raw members alias the
// parsed body: do not modify them, and copy what must outlive the body.
type Message struct {
	// ID is the raw "id" value (a string, a number or null); nil when the
	// message has no "id" member (a notification).
	ID json.RawMessage
	// Method is the decoded "method" of a request or notification; "" for
	// a response.
	Method string
	// Params is the raw "params" value (an object or an array); nil when
	// absent or null.
	Params json.RawMessage
	// Result is the raw "result" value of a success response.
	Result json.RawMessage
	// Error is the raw "error" object of an error response.
	Error json.RawMessage
	// Raw is the whole message, as it appears in the body.
	Raw json.RawMessage

	// Offsets into the parsed body, for splicing rewritten results back in.
	start, end             int
	resultStart, resultEnd int

	// tool is params.name of a tools/call as the parse checked it, read
	// from toolOf (the Params it had then): the policy, the audit entry
	// and the framing check each ask for it, and a Params replaced since
	// is read again (ToolCallName).
	tool   string
	toolOf []byte
}

// IsNotification reports whether m is a request without an id, to which no
// response will come.
func IsNotification(m Message) bool { return m.Method != "" && m.ID == nil }

// IsRequest reports whether m is a request that expects a response.
func IsRequest(m Message) bool { return m.Method != "" && m.ID != nil }

// IsResponse reports whether m is a response (it has "result" or "error").
func IsResponse(m Message) bool { return m.Method == "" && (m.Result != nil || m.Error != nil) }

// ParseMessages parses a JSON-RPC 2.0 body: a single message, or a batch
// (array) of them, in which case batch is true. It accepts requests,
// notifications and responses, and rejects the whole body on the first
// malformed element: the edge must not authorize part of a batch it cannot
// read. Every tools/call must have object params with a single string "name"
// (ErrInvalidParams), so that ToolCallName never disagrees with what the
// upstream will execute. Members it does not know are left alone.
//
// Errors wrap ErrEmpty, ErrParse, ErrTooDeep, ErrEmptyBatch, ErrNotObject,
// ErrInvalidMessage (ErrRequestAndResponse, which is ErrAmbiguous too, for
// a message with a method and a result or error) or ErrInvalidParams;
// element errors are *MessageError.
// "params": null is accepted as absent, because some clients send it for
// methods without parameters.
func ParseMessages(body []byte) (msgs []Message, batch bool, err error) {
	return parseMessages(body, true)
}

// checkMessages is ParseMessages for a caller that needs only its verdict:
// the same checks, and no slice of messages to allocate.
func checkMessages(body []byte) error {
	_, _, err := parseMessages(body, false)
	return err
}

// parseMessages is ParseMessages; keep: return the messages (else nil).
func parseMessages(body []byte, keep bool) (msgs []Message, batch bool, err error) {
	i := skipSpace(body, 0)
	if i == len(body) {
		return nil, false, ErrEmpty
	}
	// One pass reads the messages and checks that the body is JSON. An
	// error in a message counts only if the whole body is JSON: after one,
	// the rest is only checked.
	c := jsonscan.NewCursor(body)
	c.Limit(MaxDepth)
	read := 0 // messages read, kept or not
	switch body[i] {
	case '{':
		var m Message
		if m, err = readMessage(&c, body, -1); err == nil && keep {
			msgs = []Message{m}
		}
	case '[':
		batch = true
		c.Array()
		for idx := 0; c.NextElement(); idx++ {
			switch {
			case err != nil:
				c.Skip()
			case c.Kind() != '{':
				if c.Skip(); !c.Failed() {
					err = &MessageError{Index: idx, Err: ErrNotObject}
				}
			default:
				var m Message
				if m, err = readMessage(&c, body, idx); err == nil {
					read++
					if keep {
						msgs = append(msgs, m)
					}
				}
			}
		}
	default:
		c.Skip()
		err = &MessageError{Index: -1, Err: ErrNotObject}
	}
	if !c.Done() {
		// Too deep for MCP is not yet invalid JSON: that takes the
		// check the cursor did not finish.
		if !c.TooDeep() || !jsonscan.Valid(body) {
			return nil, false, ErrParse
		}
		if err == nil {
			err = ErrTooDeep
		}
	}
	if err == nil && batch && read == 0 {
		err = ErrEmptyBatch
	}
	if err != nil {
		return nil, batch, err
	}
	return msgs, batch, nil
}

// readMessage reads the message object at c, a cursor over body; idx is
// its batch index (-1 for a single message).
func readMessage(c *jsonscan.Cursor, body []byte, idx int) (Message, error) {
	i := c.Pos()
	f, dup, err := readFound(c, 0, "jsonrpc", "id", "method", "params", "result", "error")
	if err != nil {
		return Message{}, err
	}
	return checkMessage(body, i, c.Offset(), f, dup, idx)
}

// checkMessage makes the message body[i:end] from its members f (as
// readFound finds them) and checks it; idx is its batch index.
func checkMessage(body []byte, i, end int, f spans, dup string, idx int) (Message, error) {
	bad := func(member string, err error) (Message, error) {
		return Message{}, &MessageError{Index: idx, Member: member, Err: err}
	}
	if dup != "" {
		return bad(dup, ErrInvalidMessage)
	}
	m := Message{Raw: body[i:end], start: i, end: end, resultStart: -1, resultEnd: -1}
	has := func(k int) bool { return f[k][0] >= 0 }
	val := func(k int) []byte { return body[f[k][0]:f[k][1]] }

	if v, ok := stringValue(body, f[0][0], f[0][1]); !has(0) || !ok || v != "2.0" {
		return bad("jsonrpc", ErrInvalidMessage)
	}
	if has(1) {
		switch c := body[f[1][0]]; {
		case c == '"', c == '-', c >= '0' && c <= '9', c == 'n':
			m.ID = val(1)
		default:
			return bad("id", ErrInvalidMessage)
		}
	}
	if has(3) {
		switch body[f[3][0]] {
		case '{', '[':
			m.Params = val(3)
		case 'n':
		default:
			return bad("params", ErrInvalidMessage)
		}
	}
	if has(2) {
		method, ok := methodValue(body, f[2][0], f[2][1])
		if !ok || method == "" {
			return bad("method", ErrInvalidMessage)
		}
		if has(4) || has(5) {
			return bad("", ErrRequestAndResponse)
		}
		m.Method = method
		if method == MethodToolsCall {
			name, ok := toolCallNameBytes(m.Params)
			if !ok {
				member := "params"
				if len(m.Params) > 0 && m.Params[0] == '{' {
					member = "params.name"
				}
				return bad(member, ErrInvalidParams)
			}
			m.tool, m.toolOf = string(name), m.Params
		}
		return m, nil
	}
	// A response: an id, and exactly one of result and error.
	if !has(1) || has(4) == has(5) {
		return bad("", ErrInvalidMessage)
	}
	if has(4) {
		m.Result = val(4)
		m.resultStart, m.resultEnd = f[4][0]-i, f[4][1]-i
	} else {
		if body[f[5][0]] != '{' {
			return bad("error", ErrInvalidMessage)
		}
		m.Error = val(5)
	}
	return m, nil
}

// ToolCallName returns params.name of a tools/call request; ok is false for
// any other message, or when params is not an object with exactly one
// "name" member that is a valid UTF-8 string.
func ToolCallName(m Message) (string, bool) {
	if m.Method != MethodToolsCall {
		return "", false
	}
	if len(m.toolOf) > 0 && len(m.toolOf) == len(m.Params) && &m.toolOf[0] == &m.Params[0] {
		return m.tool, true // read by the parse, from these very params
	}
	return toolCallName(m.Params)
}

// ToolCallArguments returns the raw params.arguments of a tools/call; nil
// when it has none. False when m is not a tools/call or its params are not
// an object with at most one arguments member.
func ToolCallArguments(m Message) (json.RawMessage, bool) {
	params := trimSpace(m.Params)
	if m.Method != MethodToolsCall || len(params) == 0 || params[0] != '{' {
		return nil, false
	}
	f, dup, _, err := findMembers(params, 0, 1, "arguments")
	if err != nil || dup != "" {
		return nil, false
	}
	if f[0][0] < 0 {
		return nil, true
	}
	return json.RawMessage(params[f[0][0]:f[0][1]]), true
}

func toolCallName(params []byte) (string, bool) {
	b, ok := toolCallNameBytes(params)
	return string(b), ok
}

// toolCallNameBytes is toolCallName without making the string.
func toolCallNameBytes(params []byte) ([]byte, bool) {
	params = trimSpace(params)
	if len(params) == 0 || params[0] != '{' {
		return nil, false
	}
	// Params come from a parsed message, or from a caller that built the
	// Message itself: only the former is known to be valid JSON.
	f, dup, _, err := findMembers(params, 0, 1, "name")
	if err != nil || dup != "" || f[0][0] < 0 {
		return nil, false
	}
	return stringBytes(params, f[0][0], f[0][1])
}

// commonMethods are the methods parseMessage returns without allocating a
// string: the ones of nearly every request.
var commonMethods = [...]string{
	MethodToolsCall, MethodToolsList, "initialize", "notifications/initialized", "ping",
	"resources/list", "resources/read", "prompts/list", "prompts/get",
}

// methodValue is stringValue for the method member.
func methodValue(d []byte, start, end int) (string, bool) {
	b, ok := stringBytes(d, start, end)
	if !ok {
		return "", false
	}
	for _, m := range commonMethods {
		if string(b) == m {
			return m, true
		}
	}
	return string(b), true
}

// IDKey returns a map key for a JSON-RPC id that is equal for ids a client
// and a server consider the same although their bytes differ: a string id
// compares after unescaping ("\u0061" is "a"), a number id by value (1.0 is
// 1, as a JavaScript server echoes it). String and number ids never collide.
// It returns "" for a missing id.
func IDKey(id json.RawMessage) string {
	id = trimSpace(id)
	if len(id) == 0 {
		return ""
	}
	switch c := id[0]; {
	case c == '"':
		s, err := unquote(id)
		if err != nil {
			return "x" + string(id)
		}
		return "s" + string(s)
	case c == '-' || c >= '0' && c <= '9':
		return "n" + normalizeNumber(string(id))
	case string(id) == "null":
		return "null"
	default:
		return "x" + string(id)
	}
}

// normalizeNumber gives the JavaScript rendering of integral numbers up to
// 2^63 (which covers every id a client generates) and the shortest float
// form of the rest.
func normalizeNumber(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0"
		}
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// RequestMethods maps IDKey(id) to the method of every request in msgs, for
// FilterResponseBody and CheckResponseBody to know what each response
// answers. An id that requests of different methods share maps to "",
// which those functions treat as an id they do not know: the last request
// must not decide what a response to the first one is. Callers that police
// requests refuse such batches anyway (CheckUniqueIDs).
func RequestMethods(msgs []Message) map[string]string {
	out := make(map[string]string, len(msgs))
	for _, m := range msgs {
		if !IsRequest(m) {
			continue
		}
		k := IDKey(m.ID)
		if prev, seen := out[k]; seen && prev != m.Method {
			out[k] = ""
			continue
		}
		out[k] = m.Method
	}
	return out
}

// CheckUniqueIDs reports requests of a batch whose ids a server could take
// for one id, with a *MessageError wrapping ErrDuplicateID for the second
// of them. A server answers both with that id, and nothing then tells the
// edge which answer is the tools/list one (JSON-RPC 2.0 and MCP both want
// ids unique). The comparison is looser than IDKey's, to cover every
// server: numbers compare as float64 values, as JavaScript reads them
// (1 and 1.0, 2^53 and 2^53+1), and a string that holds a number compares
// equal to that number, for servers that coerce ids. Notifications and
// responses are not compared: a client's responses carry the server's ids.
func CheckUniqueIDs(msgs []Message) error {
	if len(msgs) < 2 {
		return nil
	}
	seen := make(map[string]struct{}, len(msgs))
	for i, m := range msgs {
		if !IsRequest(m) {
			continue
		}
		k := looseIDKey(m.ID)
		if _, dup := seen[k]; dup {
			return &MessageError{Index: i, Member: "id", Err: ErrDuplicateID}
		}
		seen[k] = struct{}{}
	}
	return nil
}

// looseIDKey is the key under which CheckUniqueIDs compares ids.
func looseIDKey(id json.RawMessage) string {
	id = trimSpace(id)
	if len(id) == 0 {
		return ""
	}
	num := id
	if id[0] == '"' {
		s, err := unquote(id)
		if err != nil {
			return "x" + string(id)
		}
		num = []byte(strings.TrimSpace(string(s)))
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return IDKey(id) // a string that is no number, or null
	}
	if f == 0 {
		f = 0 // -0
	}
	return "n" + strconv.FormatFloat(f, 'g', -1, 64)
}
