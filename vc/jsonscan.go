package vc

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// jsonScan reads one JSON text in a single pass, checking its syntax as it
// goes. It exists for the VC-JWT hot path (jwtdecode.go): encoding/json
// validates the whole text first and then decodes it, and every custom
// UnmarshalJSON below it (string-or-array members, dates, the subject)
// starts over on its part of the text with a decoder of its own, so a
// KYA-OS VC-JWT's claims were scanned three or four times over, with about
// sixty allocations. jsonScan accepts exactly the JSON encoding/json
// accepts (RFC 8259, nesting at most 10000 deep) and, where unquoting is
// not trivial, lets encoding/json do it, so a decoded value is the one
// encoding/json gives. FuzzJWTDecodeMatchesJSON holds the two together.
//
// Errors carry no position or text: the callers report a fixed reason.
type jsonScan struct {
	data []byte
	// src is data as a string: a string value without escapes or
	// non-ASCII bytes is a substring of it, so decoding it does not
	// allocate. The decoded values keep src alive; a cache of results must
	// copy them (vc/cache detaches them).
	src   string
	i     int // next byte to read
	depth int // open objects and arrays
	// arena holds the decoded string lists, so that the few short lists
	// of a credential cost one allocation, not one each.
	arena []string
	// claims is where the parts of the claims that are pointers (the
	// credential, its delegation and constraints) and the first string
	// lists are allocated, together (claimsRoom); nil until one is needed.
	claims *claimsRoom
	// names holds the member names of the open objects.
	names jsonkey.Members
}

// errJSON: the text is not JSON, or a value does not have the type its
// member needs. Decoding stops at the first such error; encoding/json
// reports a type error only at the end, but both fail.
var errJSON = errors.New("vc: invalid JSON claims")

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

func newJSONScan(data []byte) jsonScan { return jsonScan{data: data, src: string(data)} }

// newJSONScanOf scans data, whose string src already is.
func newJSONScanOf(data []byte, src string) jsonScan { return jsonScan{data: data, src: src} }

// peek skips whitespace and returns the next byte, 0 at the end.
func (s *jsonScan) peek() byte {
	for s.i < len(s.data) {
		switch c := s.data[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// end checks that only whitespace is left.
func (s *jsonScan) end() error {
	if s.peek() != 0 || s.i != len(s.data) {
		return errJSON
	}
	return nil
}

func (s *jsonScan) open() error {
	s.i++
	if s.depth++; s.depth > maxJSONDepth {
		return errJSON
	}
	return nil
}

// object reads an object, calling member with each key (unquoted) and the
// scanner at the member's value, which member must read.
func (s *jsonScan) object(member func(key string) error) error {
	if s.peek() != '{' {
		return errJSON
	}
	if err := s.open(); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		s.depth--
		return nil
	}
	s.names.Open()
	for {
		key, err := s.key()
		if err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			s.names.Close()
			return nil
		default:
			return errJSON
		}
	}
}

// key reads a member name and its colon, and refuses a name the open
// object already has.
func (s *jsonScan) key() (string, error) {
	if s.peek() != '"' {
		return "", errJSON
	}
	k, err := s.stringValue()
	if err != nil {
		return "", err
	}
	if err := s.names.Add(k); err != nil {
		return "", err
	}
	if s.peek() != ':' {
		return "", errJSON
	}
	s.i++
	return k, nil
}

// array reads an array, calling elem with the scanner at each element,
// which elem must read.
func (s *jsonScan) array(elem func() error) error {
	if s.peek() != '[' {
		return errJSON
	}
	if err := s.open(); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return errJSON
		}
	}
}

// stringValue reads a string and returns it unquoted.
func (s *jsonScan) stringValue() (string, error) {
	start := s.i
	plain, err := s.scanString()
	if err != nil {
		return "", err
	}
	if plain {
		return s.src[start+1 : s.i-1], nil
	}
	// Escapes, or bytes outside ASCII (invalid UTF-8 becomes U+FFFD):
	// encoding/json's own unquoting, so the result is the same.
	var v string
	if json.Unmarshal(s.data[start:s.i], &v) != nil {
		return "", errJSON
	}
	return v, nil
}

// scanString reads past a string, the scanner at its opening quote, and
// reports whether it is plain: printable ASCII without escapes, so its
// value is its text. The lexing is internal/jsonscan's, which the edge's
// other readers of untrusted JSON share.
func (s *jsonScan) scanString() (plain bool, err error) {
	if s.peek() != '"' {
		return false, errJSON
	}
	end, plain, ok := jsonscan.ScanString(s.data, s.i)
	if !ok {
		return false, errJSON
	}
	s.i = end
	return plain, nil
}

// null reads the literal null.
func (s *jsonScan) null() error { return s.literal("null") }

func (s *jsonScan) literal(lit string) error {
	s.peek()
	if !strings.HasPrefix(s.src[s.i:], lit) {
		return errJSON
	}
	s.i += len(lit)
	return nil
}

// scanNumber reads a number.
func (s *jsonScan) scanNumber() error {
	end, ok := jsonscan.ScanNumber(s.data, s.i)
	if !ok {
		return errJSON
	}
	s.i = end
	return nil
}

// skip reads one value of any type and returns its text.
func (s *jsonScan) skip() ([]byte, error) {
	s.peek()
	start := s.i
	// Nested containers are followed with a stack of their kinds rather
	// than by recursion, so that hostile nesting costs no goroutine stack.
	var buf [32]byte
	open := buf[:0]
	for {
		// A value.
		switch c := s.peek(); c {
		case '{', '[':
			if err := s.open(); err != nil {
				return nil, err
			}
			closing := byte('}')
			if c == '[' {
				closing = ']'
			}
			if s.peek() == closing {
				s.i++
				s.depth--
				break
			}
			open = append(open, closing)
			if c == '{' {
				s.names.Open()
				if _, err := s.key(); err != nil {
					return nil, err
				}
			}
			continue
		case '"':
			if _, err := s.scanString(); err != nil {
				return nil, err
			}
		case 't':
			if err := s.literal("true"); err != nil {
				return nil, err
			}
		case 'f':
			if err := s.literal("false"); err != nil {
				return nil, err
			}
		case 'n':
			if err := s.null(); err != nil {
				return nil, err
			}
		default:
			if err := s.scanNumber(); err != nil {
				return nil, err
			}
		}
		// After a value: close what ends here, then the next member or
		// element.
		for {
			if len(open) == 0 {
				// Capped: appending to a raw member must not write over
				// the text that follows, which decoded strings may share
				// (parseJWS).
				return s.data[start:s.i:s.i], nil
			}
			closing := open[len(open)-1]
			c := s.peek()
			if c == closing {
				s.i++
				s.depth--
				open = open[:len(open)-1]
				if closing == '}' {
					s.names.Close()
				}
				continue
			}
			if c != ',' {
				return nil, errJSON
			}
			s.i++
			if closing == '}' {
				if _, err := s.key(); err != nil {
					return nil, err
				}
			}
			break
		}
	}
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
