package kyaos

import "strings"

// The forms a proof's members must have (docs/protocol/kyaos.md#request-proofs), checked byte by
// byte: every request proof passes through them, and the regular
// expressions they replace cost more than a tenth of a verification.
// forms_test.go holds those expressions and checks these functions agree
// with them (a table and a fuzz target).

// isB64URL: one or more base64url characters, no padding
// (^[A-Za-z0-9_-]+$). Nonces have this form too.
func isB64URL[T string | []byte](s T) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !b64urlBytes[s[i]] {
			return false
		}
	}
	return true
}

// b64urlBytes holds the base64url alphabet: one look-up a byte, for the
// JWS (some 270 bytes) is checked on every proof.
var b64urlBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = b64urlByte(byte(c))
	}
	return t
}()

func b64urlByte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// isRequestHash: "sha-256=:" then 43 base64 characters, "=" and ":"
// (^sha-256=:[A-Za-z0-9+/]{43}=:$), the form of a SHA-256.
func isRequestHash(s string) bool {
	const prefix, suffix, digits = "sha-256=:", "=:", 43
	if len(s) != len(prefix)+digits+len(suffix) || !strings.HasPrefix(s, prefix) || !strings.HasSuffix(s, suffix) {
		return false
	}
	for i := len(prefix); i < len(prefix)+digits; i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}

// didMethodRest returns what follows "did:key:" or "did:web:", and false
// for any other prefix.
func didMethodRest(s string) (string, bool) {
	if rest, ok := strings.CutPrefix(s, "did:key:"); ok {
		return rest, true
	}
	return strings.CutPrefix(s, "did:web:")
}

// isAgentDID: a did:key or did:web without fragment, query, path or white
// space (^did:(key|web):[^#?/\s]+$; \s is tab, newline, form feed,
// carriage return and space). Bytes of multi-byte or invalid UTF-8 are all
// 0x80 or above, so a byte test is the rune test.
func isAgentDID(s string) bool {
	rest, ok := didMethodRest(s)
	if !ok || rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '#', '?', '/', '\t', '\n', '\f', '\r', ' ':
			return false
		}
	}
	return true
}

// isKID: a did:key or did:web key id, something then "#" then something,
// no newline anywhere (^did:(key|web):.+#.+$, where . is any character but
// a newline).
func isKID(s string) bool {
	rest, ok := didMethodRest(s)
	if !ok || strings.IndexByte(rest, '\n') >= 0 {
		return false
	}
	// Some '#' with a character before and after it.
	for i := 1; i < len(rest)-1; i++ {
		if rest[i] == '#' {
			return true
		}
	}
	return false
}
