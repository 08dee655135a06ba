package dpop

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/mcpi-edge/caddy-mcpi/internal/ed25519v"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// jwkMembers are the JWK members a proof's jwk header is read with: those
// used, the private ones (refused), and the common others (ignored), so
// that a case variant of any of them is refused rather than read by some
// parser and not by another.
var jwkMembers = []string{"kty", "crv", "x", "y", "d", "alg", "use", "key_ops", "kid", "p", "q", "dp", "dq", "qi", "k", "oth", "n", "e"}

// proofKey is a proof's public key as its jwk header gives it.
type proofKey struct {
	pub crypto.PublicKey
	alg algSet
	// jwkAlg is the jwk's own alg member, "" when absent.
	jwkAlg string
	// crv, x, y are the members the RFC 7638 thumbprint is made of, as
	// the header spells them (canonical base64url: strict decoding
	// refuses any other spelling of the same bytes).
	crv, x, y string
}

// readJWK reads the jwk header: a public OKP Ed25519 or EC P-256 key. It is
// read here rather than with a general JWK parser because it is read on
// every request that presents a bound credential: the members it needs are
// few, and the thumbprint is made from them directly. A private member (d,
// or those of other key types) is refused: the client has sent its
// secret, and the key must not be trusted.
func readJWK(raw []byte) (proofKey, error) {
	if raw == nil {
		return proofKey{}, fmt.Errorf("%w (no jwk header)", ErrMalformed)
	}
	m, err := jsonscan.Object(raw, jwkMembers...)
	if err != nil {
		return proofKey{}, fmt.Errorf("%w (jwk: %v)", ErrMalformed, err)
	}
	for _, p := range []string{"d", "p", "q", "dp", "dq", "qi", "k", "oth"} {
		if m[p] != nil {
			return proofKey{}, fmt.Errorf("%w (the jwk header holds a private key: send only the public key, and make a new key pair)", ErrMalformed)
		}
	}
	var k proofKey
	kty, ok := strClaim(m["kty"])
	if !ok {
		return proofKey{}, fmt.Errorf("%w (jwk has no kty)", ErrMalformed)
	}
	if raw := m["alg"]; raw != nil {
		if k.jwkAlg, ok = strClaim(raw); !ok {
			return proofKey{}, fmt.Errorf("%w (jwk alg must be a string)", ErrMalformed)
		}
	}
	k.crv, _ = strClaim(m["crv"])
	k.x, _ = strClaim(m["x"])
	x, errX := b64url.DecodeString(k.x)
	switch {
	case kty == "OKP" && k.crv == "Ed25519":
		if m["y"] != nil || errX != nil || len(x) != ed25519.PublicKeySize || ed25519v.SmallOrder(ed25519.PublicKey(x)) {
			return proofKey{}, fmt.Errorf("%w (jwk is not a usable Ed25519 public key)", ErrMalformed)
		}
		k.pub, k.alg = ed25519.PublicKey(x), algEdDSA
	case kty == "EC" && k.crv == "P-256":
		k.y, _ = strClaim(m["y"])
		y, errY := b64url.DecodeString(k.y)
		if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
			return proofKey{}, fmt.Errorf("%w (jwk is not a P-256 public key)", ErrMalformed)
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return proofKey{}, fmt.Errorf("%w (jwk is not a point on P-256)", ErrMalformed)
		}
		k.pub, k.alg = pub, algES256
	default:
		return proofKey{}, fmt.Errorf("%w (jwk must be an OKP Ed25519 or EC P-256 key)", ErrAlg)
	}
	return k, nil
}

// thumbprint is the RFC 7638 SHA-256 thumbprint: the hash of the required
// members in lexicographic order, without whitespace. The values are
// base64url and curve names, which JSON writes as they are.
func (k proofKey) thumbprint() string {
	var buf [160]byte
	b := buf[:0]
	if k.alg == algEdDSA {
		b = append(b, `{"crv":"Ed25519","kty":"OKP","x":"`...)
		b = append(b, k.x...)
		b = append(b, `"}`...)
	} else {
		b = append(b, `{"crv":"P-256","kty":"EC","x":"`...)
		b = append(b, k.x...)
		b = append(b, `","y":"`...)
		b = append(b, k.y...)
		b = append(b, `"}`...)
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

var b64url = base64.RawURLEncoding.Strict()
