package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// FilterToolsList removes from a tools/list result every tool for which
// allow returns false, so that agents are not shown tools they may not call.
// Only the "tools" array is rebuilt, from the kept elements' original bytes:
// every other member of the result and every member of each kept tool stays
// byte-identical. When nothing is removed the input itself is returned.
//
// A tool without a single string "name", or an element that is not an
// object, is removed: what cannot be named cannot be authorized. A result
// without "tools" (or with "tools": null) is returned unchanged; "tools" of
// another type is ErrInvalidToolsList, and a result that is not an object
// is ErrNotObject. The result is read strictly: a member name
// repeated in some letter case anywhere in it, or a "tools" spelt in another
// case ("TOOLS", "toolſ"), is ErrAmbiguous, since clients that fold case or
// keep the last repeat would see a list the filter did not. A nil allow
// keeps everything.
func FilterToolsList(result json.RawMessage, allow func(toolName string) bool) (json.RawMessage, error) {
	if err := jsonscan.CheckMembers(result); errors.Is(err, jsonkey.ErrRepeated) {
		return nil, fmt.Errorf("%w (%w)", ErrAmbiguous, err)
	} else if err != nil {
		return nil, ErrParse
	}
	out, _, err := filterToolsList(result, allow, 0)
	return out, err
}

// filterToolsList does FilterToolsList on valid JSON, whose repeated member
// names the caller has refused (strictAnswer). depth is the nesting level of
// the container holding result. changed reports whether a tool was removed.
func filterToolsList(result []byte, allow func(string) bool, depth int) (out []byte, changed bool, err error) {
	if allow == nil {
		return result, false, nil
	}
	i := skipSpace(result, 0)
	if i == len(result) || result[i] != '{' {
		return nil, false, ErrNotObject
	}
	// One pass over the result: its members, and the tools of its "tools"
	// array with their names (finding a tool's name finds its end).
	type span struct{ s, e int }
	var kept []span
	removed, twice, folded := false, false, false
	as, ae := -1, -1
	c := cursorAt(result, i, MaxDepth-depth)
	c.Object()
	for c.NextMember() {
		key, err := unquote(c.Key())
		if err != nil {
			return nil, false, err
		}
		if string(key) != "tools" || as >= 0 {
			twice = twice || string(key) == "tools"
			folded = folded || isVariant(key, "tools")
			c.Skip()
			continue
		}
		as = i + c.Pos()
		if !c.Array() {
			_, e := c.Skip()
			ae = i + e
			continue
		}
		for c.NextElement() {
			j := i + c.Pos()
			var name string
			var ok bool
			if c.Kind() == '{' {
				f, dup := notFound(nameMember), ""
				err := readMembers(&c, i, func(m member) error {
					f.add(m, nameMember, &dup)
					// "Name" alone is the name to encoding/json.
					folded = folded || isVariant(m.key, "name")
					return nil
				})
				if err != nil {
					break
				}
				if dup == "" && f[0][0] >= 0 {
					name, ok = stringValue(result, f[0][0], f[0][1])
				}
			} else {
				c.Skip()
			}
			if ok && allow(name) {
				kept = append(kept, span{j, i + c.Offset()})
			} else {
				removed = true
			}
		}
		ae = i + c.Offset()
	}
	switch {
	case c.Failed():
		return nil, false, scanErr(&c)
	case folded:
		return nil, false, ErrAmbiguous
	case twice:
		return nil, false, ErrInvalidToolsList
	case as < 0 || result[as] == 'n':
		return result, false, nil
	case result[as] != '[':
		return nil, false, ErrInvalidToolsList
	}
	if !removed {
		return result, false, nil
	}
	size := len(result) - (ae - as) + 2 + len(kept)
	for _, k := range kept {
		size += k.e - k.s
	}
	out = make([]byte, 0, size)
	out = append(out, result[:as]...)
	out = append(out, '[')
	for n, k := range kept {
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, result[k.s:k.e]...)
	}
	out = append(out, ']')
	out = append(out, result[ae:]...)
	return out, true, nil
}

// FilterResponseBody applies FilterToolsList to the responses in a JSON-RPC
// body (a single message or a batch, e.g. an upstream's application/json
// answer or one SSE event's data) that may carry a tool list.
// requestIDs maps IDKey(id) to the request's method (see RequestMethods).
// Which responses are filtered:
//
//   - an answer to a tools/list request;
//   - a response whose id is not in requestIDs (or maps to "") but whose
//     result has a "tools" member: a replayed stream (SSE resumption with
//     Last-Event-ID) carries responses to requests this edge never saw,
//     and an unfiltered list must not slip through that way;
//   - an answer to another request whose result looks like a tools/list
//     result: a "tools" array holding at least one object with a string
//     "name". Ids are the client's: one it reuses, or one the server
//     coerces or rounds, can make a tools/list answer carry the id of a
//     ping, and a server that routes answers by id can deliver it on
//     another request's stream. A result whose "tools" is anything else
//     is left alone, so that other methods' answers are not damaged.
//
// Every other response, request and notification is left byte-identical;
// so is the whole body when nothing is removed (the input itself is
// returned).
//
// On error the body could not be checked; since it may hold a tool list the
// caller must not forward it (answer with a JSON-RPC error instead).
func FilterResponseBody(body []byte, requestIDs map[string]string, allow func(toolName string) bool) ([]byte, error) {
	return FilterResponseBodyFor(Era2025, body, requestIDs, allow)
}

// FilterResponseBodyFor is FilterResponseBody for a request of era. Every
// tool list it filters is the caller's own, kept or not: its cacheScope
// becomes "private" (added in the 2026 era when absent; see markPrivate),
// so that no shared cache serves one agent's list to another.
func FilterResponseBodyFor(era Era, body []byte, requestIDs map[string]string, allow func(toolName string) bool) ([]byte, error) {
	out, _, err := FilterResponseBodyRead(era, body, requestIDs, allow)
	return out, err
}

// FilterResponseBodyRead is FilterResponseBodyFor, and reports whether its
// output is body itself as ParseMessages accepted it (read): then
// CheckReadResponseBody need not parse it again to know it is JSON-RPC.
func FilterResponseBodyRead(era Era, body []byte, requestIDs map[string]string, allow func(toolName string) bool) (_ []byte, read bool, _ error) {
	if allow == nil {
		return body, false, nil
	}
	msgs, _, err := ParseMessages(body)
	if err != nil {
		return nil, false, ambiguousAnswer(body, err)
	}
	// A tool list is read strictly, once per body: the answer to a
	// tools/list request before anything else (a "Result" beside an
	// "error" is no result to the filter), any other body when a result in
	// it is filtered.
	strict := false
	readStrictly := func() error {
		if strict {
			return nil
		}
		strict = true
		return strictAnswer(body, msgs)
	}
	if listRequested(requestIDs) {
		if err := readStrictly(); err != nil {
			return nil, false, err
		}
	} else if Confusable(msgs) {
		// "Result" beside "result" (or "error", or alone) is the result
		// to encoding/json, whatever the request was: withheld, since
		// the filter reads the exact member only. The
		// strict reading above covers this too.
		return nil, false, ErrAmbiguous
	}
	out, err := spliceResults(body, msgs, func(m *Message, depth int) ([]byte, bool, error) {
		switch method := requestIDs[IDKey(m.ID)]; {
		case method == MethodToolsList:
		case method != "":
			if !looksLikeToolsList(m.Result, depth) {
				return nil, false, nil
			}
		case !hasTools(m.Result, depth):
			return nil, false, nil
		}
		if err := readStrictly(); err != nil {
			return nil, false, err
		}
		out, changed, err := filterToolsList(m.Result, allow, depth)
		if err != nil {
			return nil, false, err
		}
		out, marked, err := markPrivate(out, depth, era)
		return out, changed || marked, err
	})
	if err != nil {
		return nil, false, err
	}
	return out, sameSlice(out, body), nil
}

// sameSlice reports whether a and b are the same bytes in memory.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// hasTools reports whether result is an object with a "tools" member, in
// any letter case (the filter then refuses a variant).
func hasTools(result []byte, depth int) bool {
	if len(result) == 0 || result[0] != '{' {
		return false
	}
	as, folded, err := findTools(result, depth)
	return err == nil && (as >= 0 || folded)
}

// findTools finds the "tools" member of the object result (at depth+1):
// the start of its value (-1 when absent), and whether a member spelt as a
// letter-case variant of it ("Tools", "toolſ") or given twice is there too,
// which decoders that fold case or keep the last repeat read instead.
func findTools(result []byte, depth int) (as int, folded bool, err error) {
	as = -1
	_, err = eachMember(result, 0, depth+1, func(m member) error {
		switch {
		case string(m.key) == "tools" && as < 0:
			as = m.start
		case string(m.key) == "tools", isVariant(m.key, "tools"):
			folded = true
		}
		return nil
	})
	return as, folded, err
}

// isVariant reports whether key is a letter-case variant of name without
// being it: bytes.EqualFold for ASCII (no allocation on the common path),
// jsonkey's folding (foldsTo) for any other.
func isVariant(key []byte, name string) bool {
	if string(key) == name {
		return false
	}
	if isASCII(key) {
		return len(key) == len(name) && bytes.EqualFold(key, []byte(name))
	}
	return foldsTo(key, name)
}

// listRequested reports whether a request of the body was a tools/list
// (requestIDs maps IDKey(id) to the method): a scan of the values, since
// IDKey allocates and most bodies answer a tools/call.
func listRequested(requestIDs map[string]string) bool {
	for _, method := range requestIDs {
		if method == MethodToolsList {
			return true
		}
	}
	return false
}

// strictAnswer is checkStrict for a body holding a tool list, every refusal
// of which is ErrAmbiguous: a member repeated in some letter case (a tool's
// "name" and "Name", "tools" and "TOOLS") or a JSON-RPC member in another
// case would show clients that fold case or keep the last repeat tools the
// filter removed. Such an answer is withheld, never forwarded.
func strictAnswer(body []byte, msgs []Message) error {
	err := checkStrict(body, msgs)
	if err == nil || errors.Is(err, ErrAmbiguous) {
		return err
	}
	return fmt.Errorf("%w (%w)", ErrAmbiguous, err)
}

// nameMember is the member naming a tool.
var nameMember = []string{"name"}

// ambiguousAnswer is ErrAmbiguous for a body ParseMessages refused (err)
// that clients could still read as a response, and err for any other: a
// member given twice (exactly, or in another letter case), a message with
// two of method, result and error, or one spelling a JSON-RPC member in
// another case ("Result" alone is the result to encoding/json). Decoders
// that keep the last repeat, prefer one of two, or fold case read a result
// there that the filter never saw. Only refused bodies pay
// for these scans.
func ambiguousAnswer(body []byte, err error) error {
	var me *MessageError
	if errors.As(err, &me) && confusedMessages(body) {
		return fmt.Errorf("%w (%w)", ErrAmbiguous, err)
	}
	if rerr := jsonscan.CheckMembers(body); errors.Is(rerr, jsonkey.ErrRepeated) {
		return fmt.Errorf("%w (%w)", ErrAmbiguous, rerr)
	}
	return err
}

// confusedMessages reports whether a message of body (valid JSON: a
// message or a batch) has two of "method", "result" and "error", or a
// member named like a JSON-RPC member in another case.
func confusedMessages(body []byte) bool {
	confused := func(start, depth int) bool {
		f, _, end, err := findMembers(body, start, depth, "method", "result", "error")
		n := 0
		for k := 0; k < 3; k++ {
			if f[k][0] >= 0 {
				n++
			}
		}
		return err == nil && (n >= 2 || variant(body[start:end], rpcMembers))
	}
	i := skipSpace(body, 0)
	switch {
	case i == len(body):
		return false
	case body[i] == '{':
		return confused(i, 1)
	case body[i] != '[':
		return false
	}
	_, err := eachElement(body, i, 1, func(_, start, _ int) error {
		if body[start] == '{' && confused(start, 2) {
			return errFound
		}
		return nil
	})
	return errors.Is(err, errFound)
}

// errFound stops a scan early.
var errFound = errors.New("found")

// looksLikeToolsList reports whether result is an object whose "tools"
// member is an array holding an object with a single string "name" (or
// whose "tools" or a tool's "name" is given twice, "tools" in another letter
// case too, or that cannot be scanned: then the filter runs and refuses it). depth is the nesting level of the container holding
// result.
func looksLikeToolsList(result []byte, depth int) bool {
	if len(result) == 0 || result[0] != '{' {
		return false
	}
	as, folded, err := findTools(result, depth)
	if err != nil || folded {
		return true
	}
	if as < 0 || result[as] != '[' {
		return false
	}
	_, err = eachElement(result, as, depth+2, func(_, start, _ int) error {
		if result[start] != '{' {
			return nil
		}
		f, dup, _, err := findStrict(result, start, depth+3, "name")
		if err != nil {
			return err
		}
		if dup != "" {
			return errFound // a name given twice: the filter refuses it
		}
		if f[0][0] >= 0 {
			if _, ok := stringValue(result, f[0][0], f[0][1]); ok {
				return errFound
			}
		}
		return nil
	})
	return err != nil
}

// spliceResults calls fn on every response with a result and splices the
// results it changed back into body. fn gets the nesting depth of the
// container holding the result. body is returned as is when nothing changed.
func spliceResults(body []byte, msgs []Message, fn func(m *Message, depth int) ([]byte, bool, error)) ([]byte, error) {
	return guardResults(body, msgs, func(m *Message, depth int) ([]byte, bool, bool, error) {
		res, changed, err := fn(m, depth)
		return res, changed, false, err
	})
}
