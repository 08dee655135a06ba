package mcp

import (
	"encoding/json"
	"errors"

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
// another type, or given twice, is ErrInvalidToolsList, and a result that is
// not an object is ErrNotObject. A nil allow keeps everything.
func FilterToolsList(result json.RawMessage, allow func(toolName string) bool) (json.RawMessage, error) {
	if !jsonscan.Valid(result) {
		return nil, ErrParse
	}
	out, _, err := filterToolsList(result, allow, 0)
	return out, err
}

// filterToolsList does FilterToolsList on valid JSON. depth is the nesting
// level of the container holding result. changed reports whether a tool was
// removed.
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
	removed, twice := false, false
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
				f, dup, err := readFound(&c, i, "name")
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
		return nil, false, err
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

// hasTools reports whether result is an object with a "tools" member.
func hasTools(result []byte, depth int) bool {
	if len(result) == 0 || result[0] != '{' {
		return false
	}
	f, _, _, err := findMembers(result, 0, depth+1, "tools")
	return err == nil && f[0][0] >= 0
}

// errFound stops a scan early.
var errFound = errors.New("found")

// looksLikeToolsList reports whether result is an object whose "tools"
// member is an array holding an object with a single string "name" (or
// whose "tools" is given twice, or that cannot be scanned: then the filter
// runs and refuses it). depth is the nesting level of the container holding
// result.
func looksLikeToolsList(result []byte, depth int) bool {
	if len(result) == 0 || result[0] != '{' {
		return false
	}
	f, dup, _, err := findMembers(result, 0, depth+1, "tools")
	if err != nil || dup != "" {
		return true
	}
	as := f[0][0]
	if as < 0 || result[as] != '[' {
		return false
	}
	_, err = eachElement(result, as, depth+2, func(_, start, _ int) error {
		if result[start] != '{' {
			return nil
		}
		f, dup, _, err := findMembers(result, start, depth+3, "name")
		if err != nil {
			return err
		}
		if dup == "" && f[0][0] >= 0 {
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
