// Package jsonscan checks JSON as encoding/json's json.Valid does, faster,
// and reports the members of a top-level object on the way. The edge runs
// it on every bearer and every JSON-RPC body: encoding/json's scanner, a
// state machine called per byte, was the largest part of those checks.
// CheckMembers also refuses member names repeated at any depth.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

// Valid reports whether b is one JSON value, exactly as json.Valid does.
func Valid(b []byte) bool { return Walk(b, nil) }

// ErrSyntax: CheckMembers was given something that is not one JSON value.
var ErrSyntax = errors.New("not a JSON value")

// CheckMembers checks that b is one JSON value (as Valid) in which no
// object, at any depth, has two members whose names fold together
// (jsonkey.Fold, after unescaping: "id" twice, "id" and "ID", "k" and
// "\u212a"). It returns nil, ErrSyntax, or jsonkey.ErrRepeated, which is
// reported for a repeat met before a syntax error.
//
// Parsers disagree on such objects: encoding/json decodes every repeat
// over the earlier value, matching names case-insensitively; others keep
// the first, or match exactly. A signature checked over one reading then
// vouches for another, so whoever reads untrusted JSON that others read
// too refuses it. Check before decoding: after encoding/json has merged
// the repeats, they cannot be seen.
func CheckMembers(b []byte) error { return checkMembers(b, 0, false) }

// ErrTooDeep: CheckMembersLimit met a container nested past its limit.
var ErrTooDeep = errors.New("nested too deep")

// CheckMembersLimit is CheckMembers for readers that accept less nesting
// than encoding/json: an object or array nested more than depth levels
// deep, counting those it is in, gives ErrTooDeep (or the error met
// first). Readers that walk a document recursively bound their own depth
// with it.
func CheckMembersLimit(b []byte, depth int) error { return checkMembers(b, depth, true) }

func checkMembers(b []byte, depth int, limited bool) error {
	names := membersPool.Get().(*jsonkey.Members)
	defer func() {
		// The names point into b: the pooled set must not keep it alive.
		*names = jsonkey.Members{}
		membersPool.Put(names)
	}()
	w := walker{b: b, limit: depth, limited: limited}
	w.ws()
	ok := w.value(nil, names)
	if ok {
		w.ws()
		if w.i == len(b) {
			return nil
		}
	}
	switch {
	case w.repeated:
		return jsonkey.ErrRepeated
	case limited && w.deep && w.depth < MaxDepth:
		return ErrTooDeep
	}
	return ErrSyntax
}

// membersPool recycles CheckMembers' name sets: the set is about 700
// bytes, which the stack of every caller would otherwise carry (and zero)
// on every bearer and body.
var membersPool = sync.Pool{New: func() any { return new(jsonkey.Members) }}

// Walk checks that b is one JSON value, exactly as json.Valid does, and
// calls member with the key (quoted, as in b) and the value of every member
// of b when b is an object. It reports whether b is valid.
//
// What it accepts is what encoding/json accepts: the grammar of RFC 8259,
// at most MaxDepth nested objects and arrays, strings without control
// characters, escapes \" \\ \/ \b \f \n \r \t and \u with four hex digits,
// and any other byte (encoding/json does not check UTF-8 either). The
// nesting is tracked in a bit stack, not by recursion, so that a deeply
// nested input costs a goroutine no stack.
//
// member may be called before the input turns out invalid: what it learns
// counts only when Walk returns true. It must not keep the slices.
func Walk(b []byte, member func(key, val []byte)) bool {
	w := walker{b: b}
	w.ws()
	if w.i < len(b) && b[w.i] == '{' && member != nil {
		w.top = true
	}
	if !w.value(member, nil) {
		return false
	}
	w.ws()
	return w.i == len(b)
}

// value reads the value at w.i (not whitespace), with everything nested in
// it, and stops just past it. Containers it opens count on top of those
// already open (w.depth), against MaxDepth. member is Walk's, for the
// members of the top-level object (w.top, at depth 1). names, when not
// nil, collects the member names of the objects in the value, which stops
// at a repeat (w.repeated).
//
// names is a parameter, not a field of the walker: the walker's slices
// leak to the heap (the names taken from them are kept), and a pointer
// among its fields would leak with them, moving a caller's name set, and
// whatever holds it, to the heap on every call.
func (w *walker) value(member func(key, val []byte), names *jsonkey.Members) bool {
	b := w.b
	base := w.depth
	const (
		stValue = iota // a value is next
		stKey          // a member's key is next
		stAfter        // a value just ended
	)
	var key []byte // of the top-level member being read
	var valStart int
	state := stValue
	for {
		switch state {
		case stValue:
			if w.i >= len(b) {
				return false
			}
			switch c := b[w.i]; c {
			case '{', '[':
				if !w.push(c == '{') {
					return false
				}
				w.i++
				w.ws()
				if w.i < len(b) && b[w.i] == c+2 { // '}' and ']' are '{' and '[' + 2
					w.i++
					w.pop()
					state = stAfter
				} else if c == '{' {
					if names != nil {
						names.Open()
					}
					state = stKey
				}
				continue
			case '"':
				if !w.str() {
					return false
				}
			case 't':
				if !w.lit("true") {
					return false
				}
			case 'f':
				if !w.lit("false") {
					return false
				}
			case 'n':
				if !w.lit("null") {
					return false
				}
			default:
				if !w.number() {
					return false
				}
			}
			state = stAfter

		case stKey:
			if w.i >= len(b) || b[w.i] != '"' {
				return false
			}
			k := w.i
			if !w.str() {
				return false
			}
			keyEnd := w.i
			if names != nil && !w.addName(names, k, keyEnd) {
				return false
			}
			w.ws()
			if w.i >= len(b) || b[w.i] != ':' {
				return false
			}
			w.i++
			w.ws()
			if w.top && w.depth == 1 {
				// Only the top level's: nested keys must not move them.
				key, valStart = b[k:keyEnd], w.i
			}
			state = stValue

		case stAfter:
			if w.depth == base {
				return true
			}
			if w.top && w.depth == 1 {
				member(key, b[valStart:w.i])
			}
			w.ws()
			if w.i >= len(b) {
				return false
			}
			obj := w.inObject()
			switch c := b[w.i]; {
			case c == ',':
				w.i++
				w.ws()
				state = stValue
				if obj {
					state = stKey
				}
			case c == '}' && obj, c == ']' && !obj:
				w.i++
				w.pop()
				if obj && names != nil {
					names.Close()
				}
			default:
				return false
			}
		}
	}
}

// MaxDepth is encoding/json's nesting limit: deeper input is invalid.
const MaxDepth = 10000

// walker is the state of Walk.
type walker struct {
	b     []byte
	i     int
	depth int
	// limit, when limited, bounds depth below MaxDepth (Cursor.Limit);
	// deep: a container past the bound stopped the walk.
	limit         int
	limited, deep bool
	top           bool // the top-level value is an object whose members are reported
	repeated      bool // the walk stopped at a repeated name
	// kinds holds a bit per open container, set for an object: the first
	// 64 levels in small, deeper ones in more.
	small uint64
	more  []uint64
}

// addName adds the name of the key b[start:end] (quoted) to names. An
// escaped name is unescaped by encoding/json, so that it is the name
// decoders see ("\u0069d" is "id"). Any other name shares b's bytes
// instead of copying them: names keeps it only while the caller reads b,
// which nothing writes to meanwhile (see Members.Add).
func (w *walker) addName(names *jsonkey.Members, start, end int) bool {
	var name string
	if bytes.IndexByte(w.b[start:end], '\\') >= 0 {
		// Decoded into a variable of its own: one whose address reaches
		// json.Unmarshal lives on the heap, and name would cost every
		// member of every body an allocation.
		var unescaped string
		if json.Unmarshal(w.b[start:end], &unescaped) != nil {
			return false
		}
		name = unescaped
	} else {
		name = unsafe.String(&w.b[start+1], end-start-2)
	}
	if names.Add(name) != nil {
		w.repeated = true
		return false
	}
	return true
}

// ws moves past white space. Most tokens have none before them: a byte
// above ' ' ends it at one comparison.
func (w *walker) ws() {
	for w.i < len(w.b) {
		if c := w.b[w.i]; c > ' ' || c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return
		}
		w.i++
	}
}

func (w *walker) push(obj bool) bool {
	if w.depth >= MaxDepth || w.limited && w.depth >= w.limit {
		w.deep = true
		return false
	}
	d := w.depth
	w.depth++
	var bit uint64
	if obj {
		bit = 1
	}
	if d < 64 {
		w.small = w.small&^(1<<d) | bit<<d
		return true
	}
	word, off := d/64-1, uint(d%64)
	for len(w.more) <= word {
		w.more = append(w.more, 0)
	}
	w.more[word] = w.more[word]&^(1<<off) | bit<<off
	return true
}

func (w *walker) pop() { w.depth-- }

// inObject reports whether the innermost open container is an object.
func (w *walker) inObject() bool {
	d := w.depth - 1
	if d < 64 {
		return w.small&(1<<d) != 0
	}
	return w.more[d/64-1]&(1<<uint(d%64)) != 0
}

// str moves past the string at w.i ('"').
func (w *walker) str() bool {
	b := w.b
	for i := w.i + 1; ; i++ {
		if i = skipPlain(b, i); i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '"':
			w.i = i + 1
			return true
		case c == '\\':
			i++
			if i >= len(b) {
				return false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHexDigit(h) {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		default: // a control character
			return false
		}
	}
}

// skipPlain returns the offset of the first byte of b from i on that a
// string does not hold as it is ('"', '\\' or a control character), or
// len(b). Most bytes of a string are plain (a proof's DIDs, JWS and nonce
// are nothing else): they are tested eight at a time.
func skipPlain(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && plain[b[i]] {
		i++
	}
	return i
}

// special flags (0x80) the bytes of v, eight bytes little-endian, that
// are not plain: below 0x20, '"' or '\\'. A byte's subtraction borrows
// from the byte above it only when it is itself flagged, so the lowest
// flag is always right (one above it may be spurious: the caller uses
// the lowest alone). Bytes of 0x80 and above are never flagged (&^ v).
func special(v uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	control := v - ones*0x20
	quote := (v ^ ones*'"') - ones
	backslash := (v ^ ones*'\\') - ones
	return (control | quote | backslash) &^ v & highs
}

// plain holds the bytes a string holds as they are: not '"', '\\' or a
// control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// lit moves past the literal s at w.i.
func (w *walker) lit(s string) bool {
	if len(w.b)-w.i < len(s) || string(w.b[w.i:w.i+len(s)]) != s {
		return false
	}
	w.i += len(s)
	return true
}

// number moves past the number at w.i:
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (w *walker) number() bool {
	b, i := w.b, w.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	w.i = i
	return true
}
