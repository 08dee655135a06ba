package vc

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"math/big"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"

	"github.com/mcpi-edge/caddy-mcpi/internal/ed25519v"
)

// keyAlg returns the algorithm bit a public key verifies, or 0.
func keyAlg(pub crypto.PublicKey) algSet {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			return algEdDSA
		}
	case *ecdsa.PublicKey:
		if k != nil && k.Curve == elliptic.P256() {
			return algES256
		}
	case *secp256k1.PublicKey:
		if k != nil {
			return algES256K
		}
	}
	return 0
}

// verifyJWS checks a JWS signature over the ASCII signing input. The
// algorithm must fit the key type (ErrAlgorithm); the ECDSA signatures are
// R||S, 32 bytes each (JWA §3.4), both low and high S accepted.
func verifyJWS(alg string, pub crypto.PublicKey, input, sig []byte) error {
	if algBit(alg) == 0 || algBit(alg) != keyAlg(pub) {
		return fail(ErrAlgorithm, "algorithm does not fit the key type")
	}
	ok := false
	switch alg {
	case AlgEdDSA:
		if err := refuseSmallOrder(pub.(ed25519.PublicKey)); err != nil {
			return err
		}
		ok = ed25519v.Verify(pub.(ed25519.PublicKey), input, sig)
	case AlgES256:
		if len(sig) == 64 {
			h := sha256.Sum256(input)
			r := new(big.Int).SetBytes(sig[:32])
			s := new(big.Int).SetBytes(sig[32:])
			ok = ecdsa.Verify(pub.(*ecdsa.PublicKey), h[:], r, s)
		}
	case AlgES256K:
		ok = verifyES256K(pub.(*secp256k1.PublicKey), input, sig)
	}
	if !ok {
		return fail(ErrSignature, "")
	}
	return nil
}

// errSmallOrder: a small-order Ed25519 key (a torsion point, in any
// encoding) has no secret behind it. Under the identity point R=enc(B), S=1
// "verifies" every message, and crypto/ed25519 (faithful to RFC 8032) says
// so; only the protocol can refuse such a key, as vc/kyaos does.
var errSmallOrder = fail(ErrSignature, "signing key is a small-order Ed25519 point: its signature binds no signer")

// refuseSmallOrder refuses pub as errSmallOrder before any signature under
// it is believed. The check lives here, where vc verifies, and not in the
// DID resolver: keys reach vc from did:key, did:jwk and did:web documents
// alike, and a resolver that dropped them would turn a clear "bad
// signature" into an unresolvable issuer.
func refuseSmallOrder(pub ed25519.PublicKey) error {
	if ed25519v.SmallOrder(pub) {
		return errSmallOrder
	}
	return nil
}

// verifyES256K verifies with decred's secp256k1 directly, so ES256K works
// without jwx's build tag.
func verifyES256K(pub *secp256k1.PublicKey, input, sig []byte) bool {
	if len(sig) != 64 {
		return false
	}
	var r, s secp256k1.ModNScalar
	if r.SetByteSlice(sig[:32]) || s.SetByteSlice(sig[32:]) || r.IsZero() || s.IsZero() {
		return false // overflow (>= N) or zero
	}
	h := sha256.Sum256(input)
	return secpecdsa.NewSignature(&r, &s).Verify(h[:], pub)
}
