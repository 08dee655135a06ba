package edge

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// extractBody returns the credentials held by a JSON-RPC message or batch
// and, if strip is set and any was found, the body without them. A body that
// is not valid JSON holds no carriers and is left alone.
func extractBody(body []byte, enabled carrierSet, strip bool) ([]presented, []byte) {
	if enabled&bodyCarriers == 0 || !jsonscan.Valid(body) {
		return nil, nil
	}
	var (
		found []presented
		edits []edit
	)
	i := skipWS(body, 0)
	switch body[i] {
	case '{':
		scanMessage(body, i, enabled, strip, &found, &edits)
	case '[':
		i = skipWS(body, i+1)
		for body[i] != ']' {
			if body[i] == '{' {
				scanMessage(body, i, enabled, strip, &found, &edits)
			}
			i = skipWS(body, skipValue(body, i))
			if body[i] == ',' {
				i = skipWS(body, i+1)
			}
		}
	}
	if len(edits) == 0 {
		return found, nil
	}
	return found, applyEdits(body, edits)
}

// edit replaces body[start:end] with repl.
type edit struct {
	start, end int
	repl       []byte
}

// applyEdits applies non-overlapping edits given in increasing order.
func applyEdits(b []byte, edits []edit) []byte {
	out := make([]byte, 0, len(b))
	pos := 0
	for _, e := range edits {
		out = append(out, b[pos:e.start]...)
		out = append(out, e.repl...)
		pos = e.end
	}
	return append(out, b[pos:]...)
}

// member is one "key": value pair of a JSON object; offsets index the body.
type member struct {
	// name is the unescaped key, set by objectMembers only; memberAt,
	// which must not allocate, leaves it empty (see is).
	name             string
	keyStart, keyEnd int // the key's quotes included
	valStart, valEnd int
}

// is reports whether the key of m, in b, is name in any case, as
// strings.EqualFold(m.name, name) would.
func (m member) is(b []byte, name string) bool {
	key := b[m.keyStart+1 : m.keyEnd-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		return strings.EqualFold(unquote(b[m.keyStart:m.keyEnd]), name)
	}
	return bytes.EqualFold(key, []byte(name))
}

// memberAt reads the member whose key starts at b[i] and returns it and
// the index of the next key, or of the object's closing '}'. b must be valid
// JSON (json.Valid), which is why the scanning can be simple.
func memberAt(b []byte, i int) (member, int) {
	keyEnd := skipString(b, i)
	j := skipWS(b, keyEnd)
	j = skipWS(b, j+1) // ':'
	valEnd := skipValue(b, j)
	m := member{keyStart: i, keyEnd: keyEnd, valStart: j, valEnd: valEnd}
	j = skipWS(b, valEnd)
	if b[j] == ',' {
		j = skipWS(b, j+1)
	}
	return m, j
}

// firstMember returns the index of the first key of the object at b[i]
// ('{'), or of its '}'.
func firstMember(b []byte, i int) int { return skipWS(b, i+1) }

// scanMessage reads the carriers of one JSON-RPC message starting at b[i]
// ('{'); the params objects that lose a member are recorded as edits. It
// runs on every JSON POST, so it allocates nothing unless it finds a
// carrier.
func scanMessage(b []byte, i int, enabled carrierSet, strip bool, found *[]presented, edits *[]edit) {
	toolsCall := false
	for j := firstMember(b, i); b[j] != '}'; {
		var m member
		m, j = memberAt(b, j)
		if m.is(b, "method") && b[m.valStart] == '"' && jsonStringIs(b[m.valStart:m.valEnd], "tools/call") {
			toolsCall = true
		}
	}
	for j := firstMember(b, i); b[j] != '}'; {
		var m member
		m, j = memberAt(b, j)
		if !m.is(b, "params") || b[m.valStart] != '{' {
			continue
		}
		if repl := scanParams(b, m.valStart, enabled, toolsCall, strip, found); repl != nil {
			*edits = append(*edits, edit{m.valStart, m.valEnd, repl})
		}
	}
}

// jsonStringIs reports whether the JSON string q (quotes included) decodes
// to s.
func jsonStringIs(q []byte, s string) bool {
	if bytes.IndexByte(q, '\\') >= 0 {
		var v string
		return json.Unmarshal(q, &v) == nil && v == s
	}
	return string(q[1:len(q)-1]) == s
}

// scanParams reads params.delegationToken and, for tools/call,
// params.arguments._mcpi_delegation. It returns the rewritten params object
// when strip is set and a carrier was found, else nil.
func scanParams(b []byte, i int, enabled carrierSet, toolsCall, strip bool, found *[]presented) []byte {
	var r objectRewrite
	for j := firstMember(b, i); b[j] != '}'; {
		var m member
		m, j = memberAt(b, j)
		if enabled.has(carrierDelegationToken) && m.is(b, "delegationToken") {
			if p, ok := credentialValue(b, m, carrierDelegationToken); ok {
				*found = append(*found, p)
				if strip {
					r.drop(b, i)
					continue
				}
			}
		}
		if toolsCall && enabled.has(carrierMCPIDelegation) && m.is(b, "arguments") && b[m.valStart] == '{' {
			if args := scanArguments(b, m.valStart, strip, found); args != nil {
				r.replace(b, i, append(append([]byte(nil), b[m.keyStart:m.valStart]...), args...))
				continue
			}
		}
		r.keep(b[m.keyStart:m.valEnd])
	}
	return r.result()
}

// scanArguments reads arguments._mcpi_delegation; see scanParams.
func scanArguments(b []byte, i int, strip bool, found *[]presented) []byte {
	var r objectRewrite
	for j := firstMember(b, i); b[j] != '}'; {
		var m member
		m, j = memberAt(b, j)
		if m.is(b, "_mcpi_delegation") {
			if p, ok := credentialValue(b, m, carrierMCPIDelegation); ok {
				*found = append(*found, p)
				if strip {
					r.drop(b, i)
					continue
				}
			}
		}
		r.keep(b[m.keyStart:m.valEnd])
	}
	return r.result()
}

// objectRewrite collects the members of an object being rewritten, member
// by member in order. It holds nothing until the first member is dropped or
// replaced: the members kept before it are only counted, and gathered from
// the object then, so that an object left as it is costs no allocation.
type objectRewrite struct {
	kept  int      // members kept before the first change
	parts [][]byte // nil until the first change
}

func (r *objectRewrite) keep(part []byte) {
	if r.parts == nil {
		r.kept++
		return
	}
	r.parts = append(r.parts, part)
}

func (r *objectRewrite) drop(b []byte, obj int) { r.change(b, obj) }

func (r *objectRewrite) replace(b []byte, obj int, part []byte) {
	r.change(b, obj)
	r.parts = append(r.parts, part)
}

// change gathers the members kept so far from the object at b[obj].
func (r *objectRewrite) change(b []byte, obj int) {
	if r.parts != nil {
		return
	}
	r.parts = make([][]byte, 0, r.kept+2)
	for j := firstMember(b, obj); len(r.parts) < r.kept; {
		var m member
		m, j = memberAt(b, j)
		r.parts = append(r.parts, b[m.keyStart:m.valEnd])
	}
}

// result is the rewritten object, or nil when nothing changed.
func (r *objectRewrite) result() []byte {
	if r.parts == nil {
		return nil
	}
	return joinObject(r.parts)
}

// credentialValue turns a carrier member into a presented credential: a
// string is the credential text, an object is a JSON VC kept as raw bytes.
// null means absent. Any other value is still a presented credential (its
// raw JSON), so it fails verification as malformed instead of slipping
// through to the upstream unchecked.
func credentialValue(b []byte, m member, c carrier) (presented, bool) {
	v := b[m.valStart:m.valEnd]
	switch v[0] {
	case 'n':
		return presented{}, false
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return presented{}, false // unreachable after json.Valid
		}
		return presented{c, []byte(s)}, true
	}
	return presented{c, v}, true
}

func joinObject(parts [][]byte) []byte {
	out := []byte{'{'}
	out = append(out, bytes.Join(parts, []byte{','})...)
	return append(out, '}')
}

// objectMembers lists the members of the object at b[i] ('{'), with their
// unescaped names. b must be valid JSON (json.Valid).
func objectMembers(b []byte, i int) []member {
	var ms []member
	for j := firstMember(b, i); b[j] != '}'; {
		var m member
		m, j = memberAt(b, j)
		m.name = unquote(b[m.keyStart:m.keyEnd])
		ms = append(ms, m)
	}
	return ms
}

func unquote(q []byte) string {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1])
	}
	var s string
	_ = json.Unmarshal(q, &s)
	return s
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}
