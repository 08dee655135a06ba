package carrier

import (
	"bytes"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// JSON-RPC body carriers: params.delegationToken of any message and
// params.arguments._mcpi_delegation of a tools/call, in a message or in
// each message of a batch.
//
// The body is read once, by a jsonscan.Cursor that checks it is JSON on
// the way, instead of being decoded into maps: a decode/re-encode would
// reorder keys and reformat numbers in every message, while only the
// members that held the credential must go.
// Keys are matched case-insensitively, as encoding/json does for struct
// fields, so "DelegationToken" cannot smuggle a second credential past the
// edge to a Go upstream; duplicate keys are all read and all removed, since
// parsers disagree on which duplicate wins.

// scanBody returns the credentials held by a JSON-RPC message or batch
// and, if strip is set and any was found, the body without them. ok is
// false when body is not one valid JSON value; it then holds nothing.
func scanBody(body []byte, enabled Set, strip bool) (found []Credential, stripped []byte, ok bool) {
	s := bodyScan{b: body, enabled: enabled, c: jsonscan.NewCursor(body)}
	switch s.c.Kind() {
	case '{':
		s.message()
	case '[':
		s.c.Array()
		for s.c.NextElement() {
			if s.c.Kind() == '{' {
				s.message()
			} else {
				s.c.Skip()
			}
		}
	default:
		s.c.Skip()
	}
	if !s.c.Done() {
		return nil, nil, false
	}
	if !strip || len(s.changed) == 0 {
		return s.found, nil, true
	}
	return s.found, s.strip(), true
}

// bodyScan is the state of scanBody. It allocates nothing unless it finds
// a carrier.
type bodyScan struct {
	b       []byte
	enabled Set
	c       jsonscan.Cursor
	found   []Credential
	// pending are the carriers of the message being read: whether those
	// in arguments count is known only at its end, since "method" may
	// come after "params".
	pending []pending
	// changed are the params objects that lose a member.
	changed []changedParams
}

type pending struct {
	carrier    Kind
	start, end int // the value
	params     int // the offset of the params object holding it
}

type changedParams struct {
	start     int
	toolsCall bool
}

// message reads the message at the cursor (an object).
func (s *bodyScan) message() {
	c := &s.c
	c.Object()
	toolsCall := false
	for c.NextMember() {
		key := c.Key()
		switch {
		case keyIs(key, "method"):
			if q, ok := c.String(); ok && string(jsonscan.Unquote(q)) == "tools/call" {
				toolsCall = true
			}
		case keyIs(key, "params") && c.Kind() == '{':
			s.params()
		default:
			c.Skip()
		}
	}
	for _, p := range s.pending {
		if p.carrier == MCPIDelegation && !toolsCall || p.start == p.end {
			continue // not a tools/call; or not JSON, and nothing counts
		}
		cred, ok := credentialValue(s.b[p.start:p.end], p.carrier)
		if !ok {
			continue
		}
		s.found = append(s.found, cred)
		if n := len(s.changed); n == 0 || s.changed[n-1].start != p.params {
			s.changed = append(s.changed, changedParams{p.params, toolsCall})
		}
	}
	s.pending = s.pending[:0]
}

// params reads the params object at the cursor: delegationToken, and
// arguments._mcpi_delegation, which counts if the message is a tools/call.
func (s *bodyScan) params() {
	c := &s.c
	start := c.Pos()
	c.Object()
	for c.NextMember() {
		key := c.Key()
		switch {
		case s.enabled.Has(DelegationToken) && keyIs(key, "delegationToken"):
			vs, ve := c.Skip()
			s.pending = append(s.pending, pending{DelegationToken, vs, ve, start})
		case s.enabled.Has(MCPIDelegation) && keyIs(key, "arguments") && c.Kind() == '{':
			c.Object()
			for c.NextMember() {
				if keyIs(c.Key(), "_mcpi_delegation") {
					vs, ve := c.Skip()
					s.pending = append(s.pending, pending{MCPIDelegation, vs, ve, start})
				} else {
					c.Skip()
				}
			}
		default:
			c.Skip()
		}
	}
}

// strip returns the body with the carriers found removed from their params
// objects. Only a changed params object is rewritten: its members are
// joined by ',' without the whitespace around them; every other byte stays.
func (s *bodyScan) strip() []byte {
	out := make([]byte, 0, len(s.b))
	pos := 0
	for _, p := range s.changed {
		repl, end := rewriteParams(s.b, p.start, s.enabled, p.toolsCall)
		out = append(out, s.b[pos:p.start]...)
		out = append(out, repl...)
		pos = end
	}
	return append(out, s.b[pos:]...)
}

// rewriteParams returns the params object at b[start] without its
// carriers, and the offset just past it. b is valid JSON.
func rewriteParams(b []byte, start int, enabled Set, toolsCall bool) ([]byte, int) {
	c := jsonscan.NewCursor(b[start:])
	c.Object()
	var parts [][]byte
	for c.NextMember() {
		p := b[start:]
		key, ks := c.Key(), c.KeyStart()
		switch {
		case enabled.Has(DelegationToken) && keyIs(key, "delegationToken"):
			vs, ve := c.Skip()
			if p[vs] != 'n' { // a credential, and not null: dropped
				continue
			}
			parts = append(parts, p[ks:ve])
		case toolsCall && enabled.Has(MCPIDelegation) && keyIs(key, "arguments") && c.Kind() == '{':
			vs := c.Pos()
			args := rewriteArguments(&c, p)
			if args == nil {
				parts = append(parts, p[ks:c.Offset()])
			} else {
				parts = append(parts, append(append([]byte(nil), p[ks:vs]...), args...))
			}
		default:
			_, ve := c.Skip()
			parts = append(parts, p[ks:ve])
		}
	}
	return joinObject(parts), start + c.Offset()
}

// rewriteArguments reads the arguments object at the cursor and returns it
// without _mcpi_delegation, or nil when it has none to drop.
func rewriteArguments(c *jsonscan.Cursor, p []byte) []byte {
	c.Object()
	var parts [][]byte
	dropped := false
	for c.NextMember() {
		key, ks := c.Key(), c.KeyStart()
		vs, ve := c.Skip()
		if keyIs(key, "_mcpi_delegation") && p[vs] != 'n' {
			dropped = true
			continue
		}
		parts = append(parts, p[ks:ve])
	}
	if !dropped {
		return nil
	}
	return joinObject(parts)
}

func joinObject(parts [][]byte) []byte {
	out := []byte{'{'}
	out = append(out, bytes.Join(parts, []byte{','})...)
	return append(out, '}')
}

// keyIs reports whether the key q (quoted, as in the document) is name in
// any case, after unescaping: as encoding/json matches a struct field.
func keyIs(q []byte, name string) bool {
	key := q[1 : len(q)-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		return strings.EqualFold(string(jsonscan.Unquote(q)), name)
	}
	return bytes.EqualFold(key, []byte(name))
}

// credentialValue turns the value of a carrier member into a credential:
// a string is the credential text, an object is a JSON VC kept as raw
// bytes. null means absent. Any other value is still a presented
// credential (its raw JSON), so it fails verification as malformed instead
// of slipping through to the upstream unchecked.
func credentialValue(v []byte, k Kind) (Credential, bool) {
	switch v[0] {
	case 'n':
		return Credential{}, false
	case '"':
		return Credential{Carrier: k, Raw: jsonscan.Unquote(v)}, true
	}
	return Credential{Carrier: k, Raw: v}, true
}
