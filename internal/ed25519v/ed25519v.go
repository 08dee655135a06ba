// Package ed25519v verifies Ed25519 signatures with exactly the acceptance
// rules of crypto/ed25519.Verify (RFC 8032 §5.1.7: canonical S < L, the
// cofactorless equation [S]B = R + [k]A compared as encodings, A decoded
// as crypto/ed25519 decodes it, non-canonical A and small-order A
// accepted as crypto/ed25519 accepts them), but faster for a public key it
// verifies for often: it keeps, per key, a table of multiples of the
// decoded point (84 KiB), which turns a verification's 252 doublings and
// about 70 additions into 6 doublings and 86 additions.
//
// Cache (and the package-level Verify on a shared Cache) decides which keys
// earn a table; PublicKey is one key with its table.
//
// Why it exists, and what holds it to crypto/ed25519: the curve arithmetic
// of point.go is copied from filippo.io/edwards25519 (whose API offers no
// per-key table), and halves the cost of a VC-JWT verification for a
// trusted issuer's key. Every verdict must be crypto/ed25519's:
// TestRFC8032Vectors (RFC 8032 §7.1), TestWycheproof (Project Wycheproof's
// EdDSA vectors, given a copy of the file), the torsion and random
// agreement tests, and FuzzVerifyAgrees (scripts/fuzz.sh), which compares
// the two on arbitrary keys, messages and signatures.
//
// When to delete it: as soon as the standard library or a maintained
// library (filippo.io/edwards25519, golang.org/x/crypto) verifies with a
// precomputed per-key table, or when a benchmark of the whole edge
// (BENCHMARKS.md, configuration c) no longer shows the gain. Callers use
// Verify and SmallOrder only: going back is crypto/ed25519.Verify at the
// few places that call Verify (SmallOrder, a check of its own, can stay).
package ed25519v

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"errors"

	"filippo.io/edwards25519"
)

// PublicKey is an Ed25519 public key with the precomputed table of -A.
// It is immutable and safe for concurrent use.
type PublicKey struct {
	raw        [ed25519.PublicKeySize]byte
	table      *combTable
	smallOrder bool
}

// NewPublicKey decodes pub as crypto/ed25519 does and computes its table
// (about the work of ten verifications).
func NewPublicKey(pub []byte) (*PublicKey, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, errors.New("ed25519v: bad public key length")
	}
	a, err := new(edwards25519.Point).SetBytes(pub)
	if err != nil {
		return nil, errors.New("ed25519v: invalid public key")
	}
	k := &PublicKey{table: newCombTable(new(edwards25519.Point).Negate(a)), smallOrder: isSmallOrder(a)}
	copy(k.raw[:], pub)
	return k, nil
}

// smallOrderOf reports whether pub does not decode as crypto/ed25519
// decodes a key, or decodes to a point of small order ([8]A is the
// identity): under such a key one signature can verify for many messages,
// so a protocol that binds a signature to its signer refuses it.
func smallOrderOf(pub []byte) bool {
	a, err := new(edwards25519.Point).SetBytes(pub)
	return err != nil || isSmallOrder(a)
}

func isSmallOrder(a *edwards25519.Point) bool {
	return new(edwards25519.Point).MultByCofactor(a).Equal(edwards25519.NewIdentityPoint()) == 1
}

// Verify reports whether sig is a valid signature of msg by k, with the
// result crypto/ed25519.Verify gives.
func (k *PublicKey) Verify(msg, sig []byte) bool {
	if len(sig) != ed25519.SignatureSize || sig[63]&224 != 0 {
		return false
	}
	if _, err := new(edwards25519.Scalar).SetCanonicalBytes(sig[32:]); err != nil {
		return false // S >= L: malleable, refused as crypto/ed25519 does
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(k.raw[:])
	h.Write(msg)
	var digest [sha512.Size]byte
	kk, err := new(edwards25519.Scalar).SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		panic("ed25519v: a 64-byte digest was refused")
	}
	// R' = [k](-A) + [S]B; S's canonical bytes are sig[32:].
	var r point
	var enc [32]byte
	r.doubleCombMult(kk.Bytes(), k.table, sig[32:], baseTable()).encode(&enc)
	return bytes.Equal(enc[:], sig[:32])
}
