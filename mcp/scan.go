package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects accepted anywhere in
// a message (the top-level object counts as 1). Nothing in this package
// recurses, but upstreams may (Python's json module fails near 1000 levels),
// and no real MCP message comes near this.
const MaxDepth = 256

// errScan means the scanner met bytes that are not valid JSON. The scanner
// only runs on input already checked with json.Valid, so this is a bug guard,
// never expected.
var errScan = errors.New("mcp: internal JSON scan error")

// The scanner below walks JSON that json.Valid has accepted, returning byte
// offsets instead of decoding, so that the edge can read the few members it
// needs and splice replacements in while every other byte stays as the
// upstream or client wrote it. Keys are compared after JSON unescaping,
// exactly (case-sensitive), and duplicates of the members we read are
// reported: encoding/json would match "Method" to a "method" field and keep
// the last duplicate, while a JavaScript upstream would see something else.

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

// stringEnd returns the offset just past the string starting at d[i] == '"'.
func stringEnd(d []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(d[j:], '"')
		if k < 0 {
			return 0, errScan
		}
		q := j + k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for p := q - 1; p > i && d[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// valueEnd returns the offset just past the value starting at d[i] (not
// whitespace). depth is the nesting level of the container holding the
// value (0 at top level); containers deeper than MaxDepth give ErrTooDeep.
func valueEnd(d []byte, i, depth int) (int, error) {
	if i >= len(d) {
		return 0, errScan
	}
	switch d[i] {
	case '"':
		return stringEnd(d, i)
	case '{', '[':
		level := 0
		for j := i; j < len(d); j++ {
			switch d[j] {
			case '"':
				k, err := stringEnd(d, j)
				if err != nil {
					return 0, err
				}
				j = k - 1
			case '{', '[':
				level++
				if depth+level > MaxDepth {
					return 0, ErrTooDeep
				}
			case '}', ']':
				level--
				if level == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errScan
	default:
		j := i
		for j < len(d) {
			switch d[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, nil
			}
			j++
		}
		return j, nil
	}
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
	j := skipSpace(d, i+1)
	if j < len(d) && d[j] == '}' {
		return j + 1, nil
	}
	for j < len(d) {
		if d[j] != '"' {
			return 0, errScan
		}
		ke, err := stringEnd(d, j)
		if err != nil {
			return 0, err
		}
		key, err := unquote(d[j:ke])
		if err != nil {
			return 0, err
		}
		j = skipSpace(d, ke)
		if j >= len(d) || d[j] != ':' {
			return 0, errScan
		}
		vs := skipSpace(d, j+1)
		ve, err := valueEnd(d, vs, depth)
		if err != nil {
			return 0, err
		}
		if err := fn(member{key: key, start: vs, end: ve}); err != nil {
			return 0, err
		}
		next, done, err := afterItem(d, ve, '}')
		if err != nil || done {
			return next, err
		}
		j = next
	}
	return 0, errScan
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
	j := skipSpace(d, i+1)
	if j < len(d) && d[j] == ']' {
		return j + 1, nil
	}
	for idx := 0; j < len(d); idx++ {
		ve, err := valueEnd(d, j, depth)
		if err != nil {
			return 0, err
		}
		if err := fn(idx, j, ve); err != nil {
			return 0, err
		}
		next, done, err := afterItem(d, ve, ']')
		if err != nil || done {
			return next, err
		}
		j = next
	}
	return 0, errScan
}

// afterItem reads what follows an item of an object or array ending at
// d[end]: a ',' (the offset of the next item) or the closing byte (done,
// the offset just past the container).
func afterItem(d []byte, end int, closing byte) (next int, done bool, err error) {
	j := skipSpace(d, end)
	switch {
	case j >= len(d):
		return 0, false, errScan
	case d[j] == ',':
		return skipSpace(d, j+1), false, nil
	case d[j] == closing:
		return j + 1, true, nil
	}
	return 0, false, errScan
}

// unquote returns the content of the JSON string s (with its quotes). The
// common case, no escapes, returns a sub-slice without allocating.
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
	if len(names) > maxFind {
		panic("mcp: findMembers: more names than maxFind")
	}
	for k := range names {
		found[k] = [2]int{-1, -1}
	}
	end, err = eachMember(d, i, depth, func(m member) error {
		for k, n := range names {
			if string(m.key) == n {
				if found[k][0] >= 0 && dup == "" {
					dup = n
				}
				found[k] = [2]int{m.start, m.end}
			}
		}
		return nil
	})
	return found, dup, end, err
}
