package didresolver

import (
	"fmt"
	"strings"
)

// maxDIDLength bounds the input before any decoding, so hostile strings
// cannot make base58 or JSON decoding expensive. A did:jwk of a P-256 key
// with a few extra members is well under 1 KiB.
const maxDIDLength = 4096

// DID is a parsed DID: "did:<Method>:<ID>" with optional fragment.
type DID struct {
	Method   string // "key", "web", "jwk"
	ID       string // method-specific id
	Fragment string // without '#', may be empty
}

// String returns "did:<method>:<id>" (without fragment).
func (d DID) String() string { return "did:" + d.Method + ":" + d.ID }

// ParseDID parses a DID or DID URL with an optional fragment.
//
// The syntax is DID Core's (method names are lowercase letters and digits;
// the method-specific id is idchars and pct-encodings separated by colons,
// not ending in a colon). DID URL paths and queries are refused: nothing in
// MCP-I uses them, and accepting them would let two spellings name one key.
func ParseDID(s string) (DID, error) {
	if s == "" {
		return DID{}, fmt.Errorf("%w: empty", ErrInvalidDID)
	}
	if len(s) > maxDIDLength {
		return DID{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalidDID, maxDIDLength)
	}
	rest, ok := strings.CutPrefix(s, "did:")
	if !ok {
		return DID{}, fmt.Errorf("%w: missing \"did:\" scheme", ErrInvalidDID)
	}
	method, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return DID{}, fmt.Errorf("%w: missing method-specific id", ErrInvalidDID)
	}
	if method == "" {
		return DID{}, fmt.Errorf("%w: empty method", ErrInvalidDID)
	}
	for i := 0; i < len(method); i++ {
		if c := method[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return DID{}, fmt.Errorf("%w: method must be lowercase letters and digits", ErrInvalidDID)
		}
	}
	id, frag, hasFrag := strings.Cut(rest, "#")
	if err := checkMethodSpecificID(id); err != nil {
		return DID{}, err
	}
	if hasFrag {
		if frag == "" {
			return DID{}, fmt.Errorf("%w: empty fragment", ErrInvalidDID)
		}
		if err := checkFragment(frag); err != nil {
			return DID{}, err
		}
	}
	return DID{Method: method, ID: id, Fragment: frag}, nil
}

func checkMethodSpecificID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty method-specific id", ErrInvalidDID)
	}
	if id[len(id)-1] == ':' {
		return fmt.Errorf("%w: method-specific id ends with ':'", ErrInvalidDID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case isIDChar(c), c == ':':
		case c == '%':
			if !validPct(id, i) {
				return fmt.Errorf("%w: bad percent-encoding", ErrInvalidDID)
			}
			i += 2
		case c == '/' || c == '?':
			return fmt.Errorf("%w: DID URL paths and queries are not supported", ErrInvalidDID)
		default:
			return fmt.Errorf("%w: invalid character in method-specific id", ErrInvalidDID)
		}
	}
	return nil
}

// checkFragment applies RFC 3986's fragment grammar.
func checkFragment(f string) error {
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case isUnreserved(c), strings.IndexByte("!$&'()*+,;=:@/?", c) >= 0:
		case c == '%':
			if !validPct(f, i) {
				return fmt.Errorf("%w: bad percent-encoding in fragment", ErrInvalidDID)
			}
			i += 2
		default:
			return fmt.Errorf("%w: invalid character in fragment", ErrInvalidDID)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isIDChar(c byte) bool { return isAlnum(c) || c == '.' || c == '-' || c == '_' }

func isUnreserved(c byte) bool { return isIDChar(c) || c == '~' }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func validPct(s string, i int) bool {
	return i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2])
}
