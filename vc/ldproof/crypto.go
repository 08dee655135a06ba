package ldproof

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/big"
	"time"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/ed25519v"
	"github.com/mr-tron/base58"
)

// JWS algorithm names; a proofValue suite implies one of them.
const (
	algEdDSA  = "EdDSA"
	algES256  = "ES256"
	algES256K = "ES256K"
)

var b64url = base64.RawURLEncoding

// keyFits reports whether key is of the type alg signs with.
func keyFits(alg string, key didresolver.Key) bool {
	switch k := key.Public.(type) {
	case ed25519.PublicKey:
		return alg == algEdDSA && len(k) == ed25519.PublicKeySize
	case *ecdsa.PublicKey:
		return alg == algES256 && k != nil && k.Curve == elliptic.P256()
	case *secp256k1.PublicKey:
		return alg == algES256K && k != nil
	}
	return false
}

func keyTypeError(alg string) error {
	return fmt.Errorf("%w: %s needs %s (%w)", ErrKeyType, alg, keyName(alg), ErrUnsupported)
}

func keyName(alg string) string {
	switch alg {
	case algES256:
		return "a P-256 key"
	case algES256K:
		return "a secp256k1 key"
	}
	return "an Ed25519 key"
}

// verifySignature checks sig over msg: pure Ed25519 for EdDSA, ECDSA over
// SHA-256(msg) with a 64-byte R||S signature (JWS form) for ES256 and
// ES256K. keyFits has been checked.
func verifySignature(alg string, key didresolver.Key, msg, sig []byte) error {
	ok := false
	switch alg {
	case algEdDSA:
		pub := key.Public.(ed25519.PublicKey)
		// A small-order key binds no signer (see vc's refuseSmallOrder).
		ok = len(sig) == ed25519.SignatureSize && !ed25519v.SmallOrder(pub) && ed25519.Verify(pub, msg, sig)
	case algES256:
		if len(sig) == 64 {
			h := sha256.Sum256(msg)
			r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
			ok = ecdsa.Verify(key.Public.(*ecdsa.PublicKey), h[:], r, s)
		}
	case algES256K:
		if len(sig) == 64 {
			var r, s secp256k1.ModNScalar
			overR, overS := r.SetByteSlice(sig[:32]), s.SetByteSlice(sig[32:])
			if !overR && !overS && !r.IsZero() && !s.IsZero() {
				h := sha256.Sum256(msg)
				ok = secpecdsa.NewSignature(&r, &s).Verify(h[:], key.Public.(*secp256k1.PublicKey))
			}
		}
	}
	if !ok {
		return ErrSignature
	}
	return nil
}

// decodeMultibase58 decodes a multibase base58btc ("z…") Ed25519
// signature. Longer input than any 64-byte value needs is refused before
// decoding, which is quadratic.
func decodeMultibase58(v string) ([]byte, error) {
	if len(v) < 2 || len(v) > 1+88 || v[0] != 'z' {
		return nil, ErrMalformed
	}
	b, err := base58.Decode(v[1:])
	if err != nil || len(b) != ed25519.SignatureSize {
		return nil, ErrMalformed
	}
	return b, nil
}

// validDateTime accepts an XML Schema dateTime as Data Integrity uses it
// (RFC 3339, with or without a zone).
func validDateTime(s string) bool {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if _, err := time.Parse(layout, s); err == nil {
			return true
		}
	}
	return false
}
