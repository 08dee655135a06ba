package challenge

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/mr-tron/base58"

	"github.com/mcpi-edge/caddy-mcpi/internal/ed25519v"
)

// Signature methods, as named in handshake supportedMethods.
const (
	MethodEd25519   = "Ed25519"
	MethodP256      = "P-256"
	MethodSecp256k1 = "secp256k1"
)

// sigSize is the size of every accepted signature: Ed25519's, and the raw
// R||S (32 bytes each) form of ECDSA P-256 and secp256k1.
const sigSize = 64

// SignChallenge is the agent side: it sets sc.ProofValue to the multibase
// base58btc ("z…") signature by priv over sc.SigningInput(). If
// sc.Timestamp is empty it is set to the current time (RFC 3339).
//
// priv is ed25519.PrivateKey (signs the bytes), *ecdsa.PrivateKey on P-256
// or *secp256k1.PrivateKey (sign SHA-256 of the bytes; raw R||S, 64 bytes).
func SignChallenge(priv crypto.PrivateKey, sc SignedChallenge) (SignedChallenge, error) {
	if len(sc.Timestamp) == 0 {
		sc.Timestamp = TimestampRFC3339(time.Now())
	}
	sc.ProofValue = ""
	msg, err := sc.SigningInput()
	if err != nil {
		return SignedChallenge{}, err
	}
	var sig []byte
	switch k := priv.(type) {
	case ed25519.PrivateKey:
		if len(k) != ed25519.PrivateKeySize {
			return SignedChallenge{}, fmt.Errorf("challenge: invalid Ed25519 private key")
		}
		sig = ed25519.Sign(k, msg)
	case *ecdsa.PrivateKey:
		if k == nil || k.Curve != elliptic.P256() {
			return SignedChallenge{}, fmt.Errorf("challenge: ECDSA key must be on P-256")
		}
		h := sha256.Sum256(msg)
		r, s, err := ecdsa.Sign(rand.Reader, k, h[:])
		if err != nil {
			return SignedChallenge{}, fmt.Errorf("challenge: signing: %w", err)
		}
		sig = make([]byte, sigSize)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	case *secp256k1.PrivateKey:
		if k == nil {
			return SignedChallenge{}, fmt.Errorf("challenge: nil secp256k1 key")
		}
		h := sha256.Sum256(msg)
		// SignCompact is [recovery byte] || R || S; R and S are what we send.
		sig = secpecdsa.SignCompact(k, h[:], true)[1:]
	default:
		return SignedChallenge{}, fmt.Errorf("challenge: unsupported private key type %T", priv)
	}
	sc.ProofValue = "z" + base58.Encode(sig)
	return sc, nil
}

// decodeProofValue returns the candidate 64-byte signatures a proofValue may
// encode: multibase base58btc ("z…"), multibase base64url ("u…") or bare
// base64url (padding optional). A bare base64url value may itself start
// with "z" or "u", so every decoding that yields 64 bytes is a candidate;
// the signature check decides.
func decodeProofValue(pv string) [][]byte {
	var out [][]byte
	add := func(b []byte, err error) {
		if err == nil && len(b) == sigSize {
			out = append(out, b)
		}
	}
	if strings.HasPrefix(pv, "z") {
		add(base58.Decode(pv[1:]))
	}
	if strings.HasPrefix(pv, "u") {
		add(base64.RawURLEncoding.DecodeString(pv[1:]))
	}
	add(base64.RawURLEncoding.DecodeString(strings.TrimRight(pv, "=")))
	return out
}

// keyMethod names the signature method of a public key, or "" if it is not
// one we verify.
func keyMethod(pub crypto.PublicKey) string {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			return MethodEd25519
		}
	case *ecdsa.PublicKey:
		if k != nil && k.Curve == elliptic.P256() {
			return MethodP256
		}
	case *secp256k1.PublicKey:
		if k != nil {
			return MethodSecp256k1
		}
	}
	return ""
}

// verifySignature checks a 64-byte signature over msg.
func verifySignature(pub crypto.PublicKey, msg, sig []byte) bool {
	if len(sig) != sigSize {
		return false
	}
	switch k := pub.(type) {
	case ed25519.PublicKey:
		// A small-order key has no secret behind it: under one, a signature
		// of any challenge can be made by anyone (vc refuses them alike).
		return len(k) == ed25519.PublicKeySize && !ed25519v.SmallOrder(k) && ed25519.Verify(k, msg, sig)
	case *ecdsa.PublicKey:
		if k == nil || k.Curve != elliptic.P256() {
			return false
		}
		h := sha256.Sum256(msg)
		r := new(big.Int).SetBytes(sig[:32])
		s := new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(k, h[:], r, s)
	case *secp256k1.PublicKey:
		if k == nil {
			return false
		}
		var r, s secp256k1.ModNScalar
		if r.SetByteSlice(sig[:32]) || s.SetByteSlice(sig[32:]) || r.IsZero() || s.IsZero() {
			return false // overflow or zero
		}
		h := sha256.Sum256(msg)
		return secpecdsa.NewSignature(&r, &s).Verify(h[:], k)
	}
	return false
}
