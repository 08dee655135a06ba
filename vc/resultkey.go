package vc

import (
	"crypto/sha256"
	"encoding/binary"
)

// resultKey names a verification: the credential and the per-call rules.
type resultKey [sha256.Size]byte

// resultKeyVersion starts the rules' encoding; change it with the encoding.
const resultKeyVersion = 3

// maxKeyOnStack is how much of a key's input (the credential, then the
// rules) is hashed from the stack; a longer one is copied to the heap.
// A KYA-OS VC-JWT is about 1.9 KB.
const maxKeyOnStack = 4096

// keyInput appends to b the input whose SHA-256 is the cache key of the
// trimmed credential raw under c, and returns false when the call must
// bypass the cache.
//
// The credential comes first, then the rules: a hit hashes the credential
// once and nothing else, and keySums takes the credential's own SHA-256
// (Delegation.Hash) on the way. The input ends with the credential's
// length (8 bytes), which says where the credential ends, and the rules'
// encoding after it is self-delimiting (lists and counts are
// length-prefixed), so no two (credential, rules) pairs share an input.
//
// Every field of checks is either encoded here or makes the call bypass
// the cache; TestResultCacheKeyCoversChecks fails when checks grows.
func (v *Verifier) keyInput(raw []byte, c *checks, b []byte) ([]byte, bool) {
	if c.nonce != nil || c.requirePresentation || len(c.ancestors) > maxPooled {
		return nil, false
	}
	b = append(b, raw...)
	b = append(b, resultKeyVersion)
	if c.requireAudience {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendStrings(b, c.audiences)
	b = appendStrings(b, c.requiredScopes)
	b = binary.AppendUvarint(b, uint64(len(c.ancestors)))
	for _, a := range c.ancestors {
		if len(a) > v.maxSize {
			return nil, false // Verify refuses it without hashing it
		}
		h := sha256.Sum256(trimSpace(a))
		b = append(b, h[:]...)
	}
	return binary.BigEndian.AppendUint64(b, uint64(len(raw))), true
}

// appendStrings appends a length-prefixed list.
func appendStrings(b []byte, l []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, s := range l {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// keySums returns the key of the input in (its SHA-256) and the SHA-256 of
// its first n bytes, the credential, in one pass.
func keySums(in []byte, n int) (key resultKey, cred [sha256.Size]byte) {
	h := sha256.New() // devirtualised and kept on the stack
	h.Write(in[:n])
	h.Sum(cred[:0]) // Sum leaves the state as it was
	h.Write(in[n:])
	h.Sum(key[:0])
	return key, cred
}
