package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

// A Cursor reads one JSON document front to back in a single pass, and
// checks it as Valid does on the way: its caller steps into the objects
// and arrays it wants to read, member by member or element by element, and
// skips every other value, which the cursor checks as it passes. Offsets
// of keys and values are reported as they go by, so that a caller can cut
// a member out of a document or splice one in, and nothing is decoded or
// copied.
//
// The caller must read every value it reaches: a member's value right
// after NextMember, an element right after NextElement, the top-level
// value first. A value is read by Skip, by Object or Array and then
// NextMember or NextElement until they return false, or by String.
//
// A cursor that meets anything Valid would refuse stops, and from then on
// reports nothing: NextMember and NextElement return false, Skip returns
// an empty span, and Done returns false. What it reported before counts
// only if Done returns true at the end.
type Cursor struct {
	w   walker
	bad bool
	// whole: the top-level value was read.
	whole bool
	// first: an Object or Array was just entered, so that no ',' comes
	// before its first member or element.
	first bool
	// keyStart and keyEnd are the offsets of the key NextMember read
	// last; keyEnd is 0 when there is none. Offsets, not a slice: a
	// decoder calls NextMember for every member, and a slice stored in the
	// cursor is a pointer write, with a write barrier while the collector
	// runs.
	keyStart, keyEnd int
}

// NewCursor returns a cursor at the start of b.
func NewCursor(b []byte) Cursor { return Cursor{w: walker{b: b}} }

// Limit makes the cursor stop at an object or array nested more than depth
// levels deep, counting those it is in, as it stops at one past MaxDepth:
// for readers that accept less nesting than encoding/json. It must be set
// before anything is read; depth may be 0 or less, for no container at
// all.
func (c *Cursor) Limit(depth int) { c.w.limit, c.w.limited = depth, true }

// Failed reports whether the cursor stopped at something Valid would
// refuse, or at a container past its limit (TooDeep).
func (c *Cursor) Failed() bool { return c.bad }

// TooDeep reports whether the cursor stopped at a container nested deeper
// than MaxDepth or its Limit.
func (c *Cursor) TooDeep() bool { return c.bad && c.w.deep }

// Pos returns the offset of the next value, past any whitespace.
func (c *Cursor) Pos() int {
	c.w.ws()
	return c.w.i
}

// Offset returns how far the cursor has read: just past the last value,
// key or bracket it read.
func (c *Cursor) Offset() int { return c.w.i }

// Kind returns the first byte of the next value ('{', '[', '"', 't', 'f',
// 'n', '-' or a digit), or 0 at the end of the input or after an error.
func (c *Cursor) Kind() byte {
	if c.bad {
		return 0
	}
	c.w.ws()
	if c.w.i >= len(c.w.b) {
		return 0
	}
	return c.w.b[c.w.i]
}

// Skip reads the next value, checking it, and returns its offsets.
func (c *Cursor) Skip() (start, end int) {
	start, end, _ = c.skip(nil)
	return start, end
}

// SkipUnique reads the next value as Skip does, and also refuses a member
// name that an object in it repeats (as CheckMembers), adding the names of
// its objects to names while they are open: the caller passes the names of
// the objects it is in, which must be open in names (Members.Open), so
// that a repeat is found whatever reads the rest of the document. names is
// per call, not kept: a caller's name set stays where the caller has it
// (on its stack). err is nil, ErrSyntax, or jsonkey.ErrRepeated for a
// repeat met before any syntax error; the cursor stops at either.
func (c *Cursor) SkipUnique(names *jsonkey.Members) (start, end int, err error) {
	return c.skip(names)
}

func (c *Cursor) skip(names *jsonkey.Members) (start, end int, err error) {
	if c.bad || c.whole {
		c.fail()
		return c.w.i, c.w.i, ErrSyntax
	}
	start = c.Pos()
	// A string, the most common value, without the state machine.
	var ok bool
	if start < len(c.w.b) && c.w.b[start] == '"' {
		ok = c.w.str()
	} else {
		ok = c.w.value(nil, names)
	}
	if !ok {
		c.fail()
		if c.w.repeated {
			return start, start, jsonkey.ErrRepeated
		}
		return start, start, ErrSyntax
	}
	c.whole = c.w.depth == 0
	return start, c.w.i, nil
}

// String reads the next value and returns it if it is a string, quotes
// included, as in the document (see Unquote); ok is false for any other
// value, which is read all the same.
func (c *Cursor) String() (q []byte, ok bool) {
	if c.Kind() != '"' {
		c.Skip()
		return nil, false
	}
	start, end := c.Skip()
	return c.w.b[start:end], !c.bad
}

// Object steps into the next value if it is an object, and reports whether
// it did; any other value is left to read.
func (c *Cursor) Object() bool { return c.enter('{') }

// Array steps into the next value if it is an array, and reports whether
// it did; any other value is left to read.
func (c *Cursor) Array() bool { return c.enter('[') }

func (c *Cursor) enter(open byte) bool {
	if c.Kind() != open || c.whole {
		return false
	}
	if !c.w.push(open == '{') {
		c.fail()
		return false
	}
	c.w.i++
	c.first = true
	return true
}

// NextMember reads the key of the next member of the object the cursor is
// in, and the ':' after it, and reports whether there was one; at the end
// of the object it steps out of it and returns false. The member's value
// is next (Pos).
func (c *Cursor) NextMember() bool {
	if !c.next('}') {
		return false
	}
	w := &c.w
	if w.i >= len(w.b) || w.b[w.i] != '"' {
		c.fail()
		return false
	}
	c.keyStart = w.i
	if !w.str() {
		c.fail()
		return false
	}
	c.keyEnd = w.i
	w.ws()
	if w.i >= len(w.b) || w.b[w.i] != ':' {
		c.fail()
		return false
	}
	w.i++
	return true
}

// NextElement reports whether the array the cursor is in has another
// element, which is next (Pos); at the end of the array it steps out of it
// and returns false.
func (c *Cursor) NextElement() bool { return c.next(']') }

// next moves past the ',' before the next item of the container the cursor
// is in and reports whether one comes, or past its closing byte, stepping
// out, and returns false.
func (c *Cursor) next(closing byte) bool {
	if c.bad {
		return false
	}
	w := &c.w
	w.ws()
	if w.i >= len(w.b) {
		c.fail()
		return false
	}
	switch {
	case w.b[w.i] == closing:
		w.i++
		w.pop()
		c.first = false
		c.whole = w.depth == 0
		return false
	case c.first:
		c.first = false
	case w.b[w.i] == ',':
		w.i++
		w.ws()
	default:
		c.fail()
		return false
	}
	if closing == '}' {
		return true
	}
	// An element, unlike a key, may not be a closing byte: "[1,]".
	if w.i >= len(w.b) || w.b[w.i] == ']' || w.b[w.i] == '}' {
		c.fail()
		return false
	}
	return true
}

// Key returns the key of the member NextMember read last, quoted, as in
// the document (see Unquote, KeyIs).
func (c *Cursor) Key() []byte {
	if c.keyEnd == 0 {
		return nil
	}
	return c.w.b[c.keyStart:c.keyEnd]
}

// KeyStart returns the offset of the key NextMember read last: where its
// member starts.
func (c *Cursor) KeyStart() int { return c.keyStart }

// Done reports whether the whole input was one valid JSON value: the
// cursor read the top-level value, and only whitespace follows it.
func (c *Cursor) Done() bool {
	if c.bad || !c.whole {
		return false
	}
	c.w.ws()
	return c.w.i == len(c.w.b)
}

func (c *Cursor) fail() {
	c.bad = true
	c.keyEnd = 0
}

// Unquote returns the text of the JSON string q (quotes included, as a
// Cursor or Walk reports it) as encoding/json decodes it: q's own bytes
// when it holds no escape and is valid UTF-8, else a decoded copy (with
// U+FFFD for bytes that are not UTF-8). q must be a string of a valid
// document; anything else gives nil.
func Unquote(q []byte) []byte {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return nil
	}
	if bytes.IndexByte(q, '\\') < 0 && utf8.Valid(q) {
		return q[1 : len(q)-1]
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return nil
	}
	return []byte(s)
}
