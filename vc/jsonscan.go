package vc

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// jsonScan decodes one JSON text in a single pass, for the VC-JWT hot path
// (jwtdecode.go): encoding/json validates the whole text first and then
// decodes it, and every custom UnmarshalJSON below it (string-or-array
// members, dates, the subject) starts over on its part of the text with a
// decoder of its own, so a KYA-OS VC-JWT's claims were scanned three or
// four times over, with about sixty allocations.
//
// The reading is internal/jsonscan's Cursor, the reader the edge's other
// readers of untrusted JSON use: it accepts exactly what encoding/json
// accepts (RFC 8259, nesting at most 10000 deep, nothing after the
// value), and the values the decoder does not look at are skipped by it,
// which refuses a member name repeated in any object inside them
// (SkipUnique). What jsonScan adds is the decoding: member names matched
// the way encoding/json matches them to fields (fieldName), repeats of
// the names it reads itself refused, and strings unquoted by encoding/json
// where that is not trivial, so a decoded value is the one encoding/json
// gives. FuzzJWTDecodeMatchesJSON holds the two together.
//
// Errors carry no position or text: the callers report a fixed reason.
type jsonScan struct {
	c    jsonscan.Cursor
	data []byte
	// src is data as a string: a string value without escapes or
	// non-ASCII bytes is a substring of it, so decoding it does not
	// allocate. The decoded values keep src alive; a cache of results must
	// copy them (vc/cache detaches them).
	src string
	// arena holds the decoded string lists, so that the few short lists
	// of a credential cost one allocation, not one each.
	arena []string
	// claims is where the parts of the claims that are pointers (the
	// credential, its delegation and constraints) and the first string
	// lists are allocated, together (claimsRoom); nil until one is needed.
	claims *claimsRoom
	// names holds the member names of the open objects. It is passed to
	// the cursor per call, never stored in it: the cursor's slices leak to
	// the heap, and a pointer beside them would take this scanner along.
	names jsonkey.Members
}

// errJSON: the text is not JSON, or a value does not have the type its
// member needs. Decoding stops at the first such error; encoding/json
// reports a type error only at the end, but both fail.
var errJSON = errors.New("vc: invalid JSON claims")

func newJSONScan(data []byte) jsonScan { return newJSONScanOf(data, string(data)) }

// newJSONScanOf scans data, whose string src already is.
func newJSONScanOf(data []byte, src string) jsonScan {
	return jsonScan{c: jsonscan.NewCursor(data), data: data, src: src}
}

// peek returns the first byte of the next value, 0 at the end or after an
// error.
func (s *jsonScan) peek() byte { return s.c.Kind() }

// end checks that the value read was the whole text.
func (s *jsonScan) end() error {
	if !s.c.Done() {
		return errJSON
	}
	return nil
}

// object reads an object, calling member with each key (unquoted) and the
// scanner at the member's value, which member must read.
func (s *jsonScan) object(member func(key string) error) error {
	if !s.c.Object() {
		return errJSON
	}
	s.names.Open()
	for s.c.NextMember() {
		key, err := s.unquote(s.c.KeyStart(), s.c.Key())
		if err != nil {
			return err
		}
		if err := s.names.Add(key); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
	}
	if s.c.Failed() {
		return errJSON
	}
	s.names.Close()
	return nil
}

// array reads an array, calling elem with the scanner at each element,
// which elem must read.
func (s *jsonScan) array(elem func() error) error {
	if !s.c.Array() {
		return errJSON
	}
	for s.c.NextElement() {
		if err := elem(); err != nil {
			return err
		}
	}
	if s.c.Failed() {
		return errJSON
	}
	return nil
}

// stringValue reads a string, which the caller has seen is next (peek),
// and returns it unquoted.
func (s *jsonScan) stringValue() (string, error) {
	start, end := s.c.Skip()
	if s.c.Failed() {
		return "", errJSON
	}
	return s.unquote(start, s.data[start:end])
}

// unquote returns the value of the string q, which starts at start.
func (s *jsonScan) unquote(start int, q []byte) (string, error) {
	if jsonscan.Plain(q) {
		return s.src[start+1 : start+len(q)-1], nil
	}
	// Escapes, or bytes outside ASCII (invalid UTF-8 becomes U+FFFD):
	// encoding/json's own unquoting, so the result is the same.
	var v string
	if json.Unmarshal(q, &v) != nil {
		return "", errJSON
	}
	return v, nil
}

// null reads the literal null.
func (s *jsonScan) null() error {
	if s.c.Kind() != 'n' {
		return errJSON
	}
	if _, err := s.skip(); err != nil {
		return err
	}
	return nil
}

// skip reads one value of any type and returns its text.
func (s *jsonScan) skip() ([]byte, error) {
	start, end, err := s.c.SkipUnique(&s.names)
	switch {
	case errors.Is(err, jsonkey.ErrRepeated):
		return nil, err
	case err != nil:
		return nil, errJSON
	}
	// Capped: appending to a raw member must not write over the text that
	// follows, which decoded strings may share (parseJWS).
	return s.data[start:end:end], nil
}

// fieldName returns the member of names that key selects, the way
// encoding/json selects a struct field: the name equal to key, else the
// first one equal under Unicode case folding ("ISS" and "iſs" both select
// "iss"); "" for none.
//
// The names are ASCII, so an ASCII key folds only to a name of its own
// length: the others are not compared (most keys a credential has and
// these names do not, issuerDid or createdAt, compared with every name).
// A key with other bytes may fold to a shorter name ("ſ" is two bytes,
// "s" one) and is compared with all.
func fieldName(key string, names []string) string {
	for _, n := range names {
		if key == n {
			return n
		}
	}
	ascii := true
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	for _, n := range names {
		if (!ascii || len(n) == len(key)) && strings.EqualFold(key, n) {
			return n
		}
	}
	return ""
}
