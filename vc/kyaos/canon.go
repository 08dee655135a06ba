package kyaos

import (
	"bytes"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// appendCanonical appends the JCS form (RFC 8785) of the JSON value at the
// start of src to dst, for the JSON that requests usually are, without the
// general canonicaliser's tree of strings and maps: object member names in
// plain ASCII, strings without escapes, and numbers. It reports ok false
// for anything else (an escape, a non-ASCII name, invalid UTF-8, a number
// JCS cannot write), and the caller then canonicalises with jcs.Transform;
// so for what it accepts it must write exactly what jcs.Transform writes
// (canon_test.go checks this, FuzzCanonical included). src has been read
// by jsonscan already (strict, valid, depth-bounded); rest is what follows
// the value.
func appendCanonical(dst, src []byte) (out, rest []byte, ok bool) {
	return appendCanonicalSkipping(dst, src, "")
}

// appendCanonicalSkipping is appendCanonical, leaving out of an object
// the member named skip (a plain name; "" for none): what the canonical
// form of the object without that member is. Only the value at the start
// of src is concerned, not objects nested in it.
func appendCanonicalSkipping(dst, src []byte, skip string) (out, rest []byte, ok bool) {
	return appendCanonicalLeaving(dst, src, leave{name: skip, at: -1})
}

// leave is the member appendCanonicalLeaving leaves out of the object at
// the start of its src: the one named name (plain; "" for none). When at
// is not negative, the caller has read src already and knows that member
// to be src[at:end] (its key to the end of its value): it is then passed
// over without reading its value again (a request's _meta, mostly the
// proof itself).
type leave struct {
	name    string
	at, end int
}

// appendCanonicalLeaving is appendCanonicalSkipping, with the member to
// leave out given by lv.
func appendCanonicalLeaving(dst, src []byte, lv leave) (out, rest []byte, ok bool) {
	origin := len(src) // the offset in src of a suffix x is origin-len(x)
	src = trimWS(src)
	if len(src) == 0 {
		return dst, nil, false
	}
	switch c := src[0]; {
	case c == '{':
		return appendCanonicalObject(dst, src[1:], lv, origin)
	case c == '[':
		return appendCanonicalArray(dst, src[1:])
	case c == '"':
		s, rest, ok := plainString(src)
		if !ok {
			return dst, nil, false
		}
		return append(dst, s...), rest, true
	case c == 't' && bytes.HasPrefix(src, []byte("true")):
		return append(dst, "true"...), src[4:], true
	case c == 'f' && bytes.HasPrefix(src, []byte("false")):
		return append(dst, "false"...), src[5:], true
	case c == 'n' && bytes.HasPrefix(src, []byte("null")):
		return append(dst, "null"...), src[4:], true
	case c == '-' || '0' <= c && c <= '9':
		return appendCanonicalNumber(dst, src)
	}
	return dst, nil, false
}

// member is an object member already written to the output: its name
// (quoted, from the input) and its bytes out[start:end], name included.
type member struct {
	name       []byte
	start, end int
}

// appendCanonicalObject writes the object whose members start src (its
// '{' read), leaving lv out; origin is the length of the src lv's offsets
// are in (see appendCanonicalLeaving).
func appendCanonicalObject(dst, src []byte, lv leave, origin int) ([]byte, []byte, bool) {
	dst = append(dst, '{')
	objStart := len(dst)
	var buf [8]member
	members := buf[:0]
	src = trimWS(src)
	if len(src) > 0 && src[0] == '}' {
		return append(dst, '}'), src[1:], true
	}
	for {
		src = trimWS(src)
		name, rest, ok := plainString(src)
		if !ok || !isASCII(name) {
			// A non-ASCII name sorts by UTF-16 code units, not bytes.
			return dst, nil, false
		}
		rest = trimWS(rest)
		if len(rest) == 0 || rest[0] != ':' {
			return dst, nil, false
		}
		if lv.name != "" && string(name[1:len(name)-1]) == lv.name {
			// Passed over, not written: only its end matters.
			if at := origin - len(src); lv.at >= 0 && at == lv.at {
				src = src[lv.end-at:]
			} else {
				c := jsonscan.NewCursor(rest[1:])
				_, end := c.Skip()
				if c.Failed() {
					return dst, nil, false
				}
				src = rest[1+end:]
			}
		} else {
			if len(members) > 0 {
				dst = append(dst, ',')
			}
			start := len(dst)
			dst = append(dst, name...)
			dst = append(dst, ':')
			if dst, src, ok = appendCanonical(dst, rest[1:]); !ok {
				return dst, nil, false
			}
			members = append(members, member{name, start, len(dst)})
		}
		src = trimWS(src)
		if len(src) == 0 {
			return dst, nil, false
		}
		if src[0] == '}' {
			src = src[1:]
			break
		}
		if src[0] != ',' {
			return dst, nil, false
		}
		src = src[1:]
	}
	// Names compare without their quotes: "a" sorts before "a b".
	byName := func(a, b member) int { return bytes.Compare(a.name[1:len(a.name)-1], b.name[1:len(b.name)-1]) }
	if !slices.IsSortedFunc(members, byName) {
		// Written in arrival order: rewrite the object's members sorted,
		// from a copy after them (the rewrite is exactly as long, so it
		// never reaches the copy).
		end := len(dst)
		dst = append(dst, dst[objStart:end]...)
		written := dst[end:]
		slices.SortFunc(members, byName)
		dst = dst[:objStart]
		for i, m := range members {
			if i > 0 && byName(members[i-1], m) == 0 {
				return dst, nil, false // a repeated name: not for this path
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, written[m.start-objStart:m.end-objStart]...)
		}
	}
	return append(dst, '}'), src, true
}

func appendCanonicalArray(dst, src []byte) ([]byte, []byte, bool) {
	dst = append(dst, '[')
	src = trimWS(src)
	if len(src) > 0 && src[0] == ']' {
		return append(dst, ']'), src[1:], true
	}
	for {
		var ok bool
		if dst, src, ok = appendCanonical(dst, src); !ok {
			return dst, nil, false
		}
		src = trimWS(src)
		if len(src) == 0 {
			return dst, nil, false
		}
		if src[0] == ']' {
			return append(dst, ']'), src[1:], true
		}
		if src[0] != ',' {
			return dst, nil, false
		}
		dst = append(dst, ',')
		src = src[1:]
	}
}

// plainString returns the JSON string at the start of src, quotes
// included, when it has no escape and is valid UTF-8: JCS writes such a
// string as it is (it escapes only control characters, which cannot
// appear unescaped, the quote and the backslash).
func plainString(src []byte) (s, rest []byte, ok bool) {
	if len(src) == 0 || src[0] != '"' {
		return nil, nil, false
	}
	end := bytes.IndexAny(src[1:], "\"\\")
	if end < 0 || src[1+end] != '"' {
		return nil, nil, false
	}
	s = src[:end+2]
	for _, c := range s {
		if c < 0x20 {
			return nil, nil, false
		}
	}
	if !utf8.Valid(s) {
		return nil, nil, false
	}
	return s, src[end+2:], true
}

// appendCanonicalNumber writes a number as JCS does: a short integer is
// already in its ES6 form; any other goes through the canonicaliser's own
// number formatting.
func appendCanonicalNumber(dst, src []byte) ([]byte, []byte, bool) {
	n := 0
	for n < len(src) && (src[n] == '-' || src[n] == '+' || src[n] == '.' || src[n] == 'e' || src[n] == 'E' || '0' <= src[n] && src[n] <= '9') {
		n++
	}
	num, rest := src[:n], src[n:]
	if shortInteger(num) {
		return append(dst, num...), rest, true
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return dst, nil, false
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return dst, nil, false
	}
	return append(dst, s...), rest, true
}

// shortInteger: -?(0|[1-9][0-9]{0,14}) but not -0. Fifteen digits are
// exact in a float64, and ES6 writes such an integer as its digits.
func shortInteger(num []byte) bool {
	d := num
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 || d[0] == '0' && (len(d) > 1 || len(num) > 1) {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// trimWS drops JSON white space from the start of b. It is called before
// every token the canonicaliser reads: a loop, where bytes.TrimLeft would
// build its set of bytes on each call.
func trimWS(b []byte) []byte {
	for len(b) > 0 {
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			b = b[1:]
		default:
			return b
		}
	}
	return b
}
