package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// MaxDepth is the deepest nesting of arrays and objects accepted anywhere in
// a message (the top-level object counts as 1). Nothing in this package
// recurses, but upstreams may (Python's json module fails near 1000 levels),
// and no real MCP message comes near this.
const MaxDepth = 256

// errScan means the reader met bytes that are not valid JSON. ParseMessages
// reports those as ErrParse; everything else reads parts of messages it
// parsed, so there it is a bug guard, never expected.
var errScan = errors.New("mcp: internal JSON scan error")

// The functions below read JSON with a jsonscan.Cursor, which checks it as
// jsonscan.Valid does on the way (and its nesting against MaxDepth). They
// return byte offsets instead of decoding, so that the edge can read the
// few members it needs and splice replacements in while every other byte
// stays as the upstream or client wrote it. Keys are
// compared after JSON unescaping, exactly (case-sensitive), and duplicates
// of the members we read are reported: encoding/json would match "Method"
// to a "method" field and keep the last duplicate, while a JavaScript
// upstream would see something else.

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(d []byte, i int) int {
	for i < len(d) && isSpace(d[i]) {
		i++
	}
	return i
}

// trimSpace returns d without leading and trailing JSON whitespace.
func trimSpace(d []byte) []byte {
	i, j := 0, len(d)
	for i < j && isSpace(d[i]) {
		i++
	}
	for j > i && isSpace(d[j-1]) {
		j--
	}
	return d[i:j]
}

// cursorAt returns a cursor over d from d[i], where containers may nest
// room levels deep before ErrTooDeep.
func cursorAt(d []byte, i, room int) jsonscan.Cursor {
	c := jsonscan.NewCursor(d[i:])
	c.Limit(room)
	return c
}

// scanErr is the error of a cursor that stopped: ErrTooDeep, or errScan
// for bytes that are not JSON.
func scanErr(c *jsonscan.Cursor) error {
	if c.TooDeep() {
		return ErrTooDeep
	}
	return errScan
}

// member is one object member: the unescaped key and the value's offsets.
type member struct {
	key        []byte
	start, end int
}

// eachMember calls fn for every member of the object starting at d[i] == '{'
// and returns the offset just past the object. depth is the nesting level of
// the object itself (1 for a top-level object).
func eachMember(d []byte, i, depth int, fn func(m member) error) (int, error) {
	if i >= len(d) || d[i] != '{' {
		return 0, errScan
	}
	if depth > MaxDepth {
		return 0, ErrTooDeep
	}
	c := cursorAt(d, i, MaxDepth-depth+1)
	if err := readMembers(&c, i, fn); err != nil {
		return 0, err
	}
	return i + c.Offset(), nil
}

// readMembers reads the object at c, a cursor over d[base:], and calls fn
// for every member, with offsets into d.
func readMembers(c *jsonscan.Cursor, base int, fn func(m member) error) error {
	c.Object()
	for c.NextMember() {
		key, err := unquote(c.Key())
		if err != nil {
			return err
		}
		start, end := c.Skip()
		if c.Failed() {
			break
		}
		if err := fn(member{key: key, start: base + start, end: base + end}); err != nil {
			return err
		}
	}
	if c.Failed() {
		return scanErr(c)
	}
	return nil
}

// eachElement calls fn with the offsets of every element of the array
// starting at d[i] == '[' and returns the offset just past the array. depth
// is the nesting level of the array itself.
func eachElement(d []byte, i, depth int, fn func(idx, start, end int) error) (int, error) {
	if i >= len(d) || d[i] != '[' {
		return 0, errScan
	}
	if depth > MaxDepth {
		return 0, ErrTooDeep
	}
	c := cursorAt(d, i, MaxDepth-depth+1)
	c.Array()
	for idx := 0; c.NextElement(); idx++ {
		start, end := c.Skip()
		if c.Failed() {
			break
		}
		if err := fn(idx, i+start, i+end); err != nil {
			return 0, err
		}
	}
	if c.Failed() {
		return 0, scanErr(&c)
	}
	return i + c.Offset(), nil
}

// unquote returns the content of the JSON string s (with its quotes). The
// common case, no escapes, returns a sub-slice without allocating, and
// leaves bytes that are not UTF-8 as they are (IDKey compares ids so).
func unquote(s []byte) ([]byte, error) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return nil, errScan
	}
	in := s[1 : len(s)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return in, nil
	}
	var out string
	if err := json.Unmarshal(s, &out); err != nil {
		return nil, errScan
	}
	return []byte(out), nil
}

// stringValue decodes the JSON string value d[start:end]; ok is false when
// the value is not a string or not valid UTF-8 (encoding/json would replace
// bad bytes with U+FFFD, other decoders may not agree on how many).
func stringValue(d []byte, start, end int) (string, bool) {
	b, ok := stringBytes(d, start, end)
	return string(b), ok
}

// stringBytes is stringValue without the string: the content itself when
// it has no escapes.
func stringBytes(d []byte, start, end int) ([]byte, bool) {
	if start >= end || d[start] != '"' {
		return nil, false
	}
	if !utf8.Valid(d[start:end]) {
		return nil, false
	}
	b, err := unquote(d[start:end])
	if err != nil {
		return nil, false
	}
	return b, true
}

// maxFind is the most names findMembers looks up at once (actionMembers).
const maxFind = 13

// spans are the offsets findMembers found: an array, not a slice, so that a
// lookup, which every message and result needs, allocates nothing.
type spans [maxFind][2]int

// findMembers looks up the named members (at most maxFind) of the object
// d[i:] (d[i] == '{'). It returns their offsets in the order of names
// ({-1,-1} when absent), the first name that occurs more than once, if any,
// and the offset just past the object.
func findMembers(d []byte, i, depth int, names ...string) (found spans, dup string, end int, err error) {
	found = notFound(names)
	end, err = eachMember(d, i, depth, func(m member) error {
		found.add(m, names, &dup)
		return nil
	})
	return found, dup, end, err
}

// readFound is findMembers for the object at c, a cursor over d[base:].
func readFound(c *jsonscan.Cursor, base int, names ...string) (found spans, dup string, err error) {
	found = notFound(names)
	err = readMembers(c, base, func(m member) error {
		found.add(m, names, &dup)
		return nil
	})
	return found, dup, err
}

func notFound(names []string) (found spans) {
	if len(names) > maxFind {
		panic("mcp: findMembers: more names than maxFind")
	}
	for k := range names {
		found[k] = [2]int{-1, -1}
	}
	return found
}

// add records m if it is one of names, and in dup the first name found
// twice.
func (found *spans) add(m member, names []string, dup *string) {
	for k, n := range names {
		if string(m.key) == n {
			if found[k][0] >= 0 && *dup == "" {
				*dup = n
			}
			found[k] = [2]int{m.start, m.end}
		}
	}
}
