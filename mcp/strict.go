package mcp

import (
	"bytes"
	"errors"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// ErrAmbiguous: the body repeats a member name in some object (exactly, or
// in another letter case or Unicode fold), or a JSON-RPC member name is
// spelt in another case. Parsers disagree on such bodies: encoding/json
// matches names case-insensitively and keeps the last repeat, so
// {"method":"ping","Method":"tools/call"} is a ping to an exact reader and a
// tools/call to a Go upstream (-32600). ErrRequestAndResponse (a message
// with a method and a result or error, a request to some readers and a
// response to others) is ErrAmbiguous too.
var ErrAmbiguous = errors.New("mcp: member name repeated, or differing from a JSON-RPC member only by case")

// rpcMembers are the JSON-RPC member names a message must spell exactly.
var rpcMembers = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// paramMembers are the params members the edge reads (the tool's name, the
// _meta holding proofs, declarations and the protocol version), which must
// be spelt exactly too.
var paramMembers = []string{"name", "_meta"}

// ParseStrict is ParseMessages for a body the edge decides on: it also
// refuses, with ErrAmbiguous, a body in which any object repeats a member
// name (jsonscan.CheckMembers: exact or folded repeats, at any depth) or a
// message or its params spell a member the edge reads in another case.
// Every decision on a request (framing, the KYA-OS gates, the tool policy)
// reads the messages ParseStrict returned, never the raw body by name.
func ParseStrict(body []byte) (msgs []Message, batch bool, err error) {
	if errors.Is(jsonscan.CheckMembers(body), jsonkey.ErrRepeated) {
		return nil, firstNonSpace(body) == '[', ErrAmbiguous
	}
	if msgs, batch, err = ParseMessages(body); err != nil {
		return nil, batch, err
	}
	if Confusable(msgs) {
		return nil, batch, ErrAmbiguous
	}
	return msgs, batch, nil
}

// Confusable reports whether a message has a member whose name equals one
// of the JSON-RPC member names only when case is ignored, or whose object
// params have one equal to "name" or "_meta" so. A lone variant is no
// repeat, yet encoding/json-based upstreams would read it as the member.
func Confusable(msgs []Message) bool {
	for _, m := range msgs {
		if !mayHoldVariant(m.Raw) {
			continue // the walks below would find none
		}
		if variant(m.Raw, rpcMembers) || (len(m.Params) > 0 && m.Params[0] == '{' && variant(m.Params, paramMembers)) {
			return true
		}
	}
	return false
}

// variant reports whether the object raw has a member whose name folds to
// one of names without being it.
func variant(raw []byte, names []string) bool {
	c := jsonscan.NewCursor(raw)
	c.Object()
	for c.NextMember() {
		key := jsonscan.Unquote(c.Key())
		c.Skip()
		// An ASCII name folds as bytes.EqualFold says; any other (the
		// Kelvin sign, the long s) as jsonkey.Fold does.
		folded := key
		if !isASCII(key) {
			folded = []byte(jsonkey.Fold(string(key)))
		}
		for _, n := range names {
			if string(key) != n && bytes.EqualFold(folded, []byte(n)) {
				return true
			}
		}
	}
	return false
}

// mayHoldVariant reports whether the message raw (valid JSON, as parsed)
// can have a member, or a params member, named like one of rpcMembers or
// paramMembers in another case: false only when raw has no escape and no
// string in it, key or value, is such a variant in ASCII, or holds a
// non-ASCII byte where a fold (the Kelvin sign, the long s, dotless i) could
// make one. Without a backslash each '"' in valid JSON opens or closes a
// string, so one pass over the bytes finds the strings without walking the
// values; Confusable's walks run only when this is true.
func mayHoldVariant(raw []byte) bool {
	// IndexByte skips the bytes between quotes fast: a long text in a
	// tool result costs a scan, not a loop over its bytes.
	if bytes.IndexByte(raw, '\\') >= 0 {
		return true
	}
	for i := 0; ; {
		q := bytes.IndexByte(raw[i:], '"')
		if q < 0 {
			return false
		}
		start := i + q + 1
		n := bytes.IndexByte(raw[start:], '"')
		if n < 0 {
			return false
		}
		if isVariantName(raw[start : start+n]) {
			return true
		}
		i = start + n + 1
	}
}

// isVariantName reports whether the unescaped string s may fold to one of
// rpcMembers or paramMembers without being it.
func isVariantName(s []byte) bool {
	if len(s) > 3*maxMemberLen || len(s) < minMemberLen {
		return false // no fold changes the length more than this
	}
	if !isASCII(s) {
		return true
	}
	for _, names := range [2][]string{rpcMembers, paramMembers} {
		for _, n := range names {
			if len(s) == len(n) && string(s) != n && bytes.EqualFold(s, []byte(n)) {
				return true
			}
		}
	}
	return false
}

// The shortest and longest of rpcMembers and paramMembers ("id",
// "jsonrpc"). A rune folding to an ASCII letter takes at most three bytes.
const minMemberLen, maxMemberLen = 2, 7

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

func firstNonSpace(b []byte) byte {
	if i := skipSpace(b, 0); i < len(b) {
		return b[i]
	}
	return 0
}
