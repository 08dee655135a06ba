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
