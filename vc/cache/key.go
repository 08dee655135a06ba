package cache

import "crypto/sha256"

// resultKey names a verification: the SHA-256 of the credential and the
// per-call rules (vc.Call.AppendKey).
type resultKey [sha256.Size]byte

// maxKeyOnStack is how much of a key's input (the credential, then the
// rules) is hashed from the stack; a longer one is copied to the heap.
// A KYA-OS VC-JWT is about 1.9 KB.
const maxKeyOnStack = 4096

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
