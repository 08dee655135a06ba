package didresolver

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// JWKs are handled by hand rather than with jwx: jwx supports secp256k1 only
// under a build tag that xcaddy users will not pass, and one code path for
// all three curves is easier to keep strict (on-curve checks, no private
// members in public contexts).

// KeyType names a key type for GenerateKey.
type KeyType string

// Key types, named as in configuration (e.g. the keygen command).
const (
	Ed25519   KeyType = "ed25519"   // EdDSA
	P256      KeyType = "p256"      // ES256
	Secp256k1 KeyType = "secp256k1" // ES256K
)

// GenerateKey returns a new private key: ed25519.PrivateKey,
// *ecdsa.PrivateKey (P-256) or *secp256k1.PrivateKey.
func GenerateKey(t KeyType) (crypto.PrivateKey, error) {
	switch t {
	case Ed25519:
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, err
	case P256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case Secp256k1:
		return secp256k1.GeneratePrivateKey()
	default:
		return nil, fmt.Errorf("%w: key type %q", ErrUnsupportedKey, string(t))
	}
}

// PublicKeyOf returns the public half of a private key from GenerateKey or
// ParsePrivateJWK.
func PublicKeyOf(priv crypto.PrivateKey) (crypto.PublicKey, error) {
	switch k := priv.(type) {
	case ed25519.PrivateKey:
		if len(k) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("%w: Ed25519 private key length %d", ErrUnsupportedKey, len(k))
		}
		return k.Public(), nil
	case *ecdsa.PrivateKey:
		if k == nil || k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w: ECDSA key is not on P-256", ErrUnsupportedKey)
		}
		return &k.PublicKey, nil
	case *secp256k1.PrivateKey:
		if k == nil {
			return nil, fmt.Errorf("%w: nil key", ErrUnsupportedKey)
		}
		return k.PubKey(), nil
	default:
		return nil, fmt.Errorf("%w: private key type %T", ErrUnsupportedKey, priv)
	}
}

// PublicJWK encodes a public key as a JWK map (for JWKS and did:web docs).
func PublicJWK(pub crypto.PublicKey) (map[string]any, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: Ed25519 key length %d", ErrUnsupportedKey, len(k))
		}
		return map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(k)}, nil
	case *ecdsa.PublicKey:
		u, err := p256Bytes(k)
		if err != nil {
			return nil, err
		}
		return map[string]any{"kty": "EC", "crv": "P-256", "x": b64(u[1:33]), "y": b64(u[33:])}, nil
	case *secp256k1.PublicKey:
		if k == nil {
			return nil, fmt.Errorf("%w: nil key", ErrUnsupportedKey)
		}
		u := k.SerializeUncompressed()
		return map[string]any{"kty": "EC", "crv": "secp256k1", "x": b64(u[1:33]), "y": b64(u[33:])}, nil
	default:
		return nil, fmt.Errorf("%w: key type %T", ErrUnsupportedKey, pub)
	}
}

// JWKDID returns the did:jwk DID for a public key. The JWK is serialised with
// members in lexicographic order (what JCS gives for these members), so one
// key always yields the same DID.
func JWKDID(pub crypto.PublicKey) (string, error) {
	jwk, err := PublicJWK(pub)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(jwk)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	return "did:jwk:" + base64.RawURLEncoding.EncodeToString(b), nil
}

// MarshalPrivateJWK encodes a private key as a JWK (OKP Ed25519, EC P-256,
// EC secp256k1) with the given kid.
func MarshalPrivateJWK(priv crypto.PrivateKey, kid string) ([]byte, error) {
	pub, err := PublicKeyOf(priv)
	if err != nil {
		return nil, err
	}
	jwk, err := PublicJWK(pub)
	if err != nil {
		return nil, err
	}
	switch k := priv.(type) {
	case ed25519.PrivateKey:
		jwk["d"] = b64(k.Seed())
	case *ecdsa.PrivateKey:
		d, err := k.Bytes()
		if err != nil {
			return nil, fmt.Errorf("%w: invalid P-256 private key", ErrUnsupportedKey)
		}
		jwk["d"] = b64(d)
	case *secp256k1.PrivateKey:
		jwk["d"] = b64(k.Serialize())
	}
	if kid != "" {
		jwk["kid"] = kid
	}
	b, err := json.Marshal(jwk)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	return b, nil
}

// ParsePrivateJWK decodes a private JWK written by MarshalPrivateJWK (or any
// OKP/EC JWK of those curves) and returns the key and its kid.
func ParsePrivateJWK(data []byte) (priv crypto.PrivateKey, kid string, err error) {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return nil, "", fmt.Errorf("%w: private JWK is not a JSON object", ErrUnsupportedKey)
	}
	if v, ok := m["kid"]; ok {
		if kid, ok = v.(string); !ok {
			return nil, "", fmt.Errorf("%w: JWK kid is not a string", ErrUnsupportedKey)
		}
	}
	pub, err := parseJWK(m, true)
	if err != nil {
		return nil, "", err
	}
	d, err := jwkBytes(m, "d", 32)
	if err != nil {
		return nil, "", err
	}
	// Every branch checks that d matches the public members: a JWK whose
	// halves disagree would sign with one key and advertise another.
	switch p := pub.(type) {
	case ed25519.PublicKey:
		k := ed25519.NewKeyFromSeed(d)
		if !p.Equal(k.Public()) {
			return nil, "", fmt.Errorf("%w: JWK d does not match x", ErrUnsupportedKey)
		}
		return k, kid, nil
	case *ecdsa.PublicKey:
		k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
		if err != nil || !p.Equal(&k.PublicKey) {
			return nil, "", fmt.Errorf("%w: JWK d is invalid or does not match x, y", ErrUnsupportedKey)
		}
		return k, kid, nil
	case *secp256k1.PublicKey:
		var s secp256k1.ModNScalar
		if overflow := s.SetByteSlice(d); overflow || s.IsZero() {
			return nil, "", fmt.Errorf("%w: JWK d out of range", ErrUnsupportedKey)
		}
		k := secp256k1.NewPrivateKey(&s)
		if !p.IsEqual(k.PubKey()) {
			return nil, "", fmt.Errorf("%w: JWK d does not match x, y", ErrUnsupportedKey)
		}
		return k, kid, nil
	}
	return nil, "", fmt.Errorf("%w: unexpected key type", ErrUnsupportedKey)
}

// parseJWK decodes the public members of an OKP or EC JWK. A "d" member is
// refused unless allowPrivate: private material in a DID document or a
// did:jwk is a leak, and silently accepting it would hide that.
func parseJWK(m map[string]any, allowPrivate bool) (crypto.PublicKey, error) {
	if _, ok := m["d"]; ok && !allowPrivate {
		return nil, fmt.Errorf("%w: public JWK contains private key material", ErrUnsupportedKey)
	}
	kty, _ := m["kty"].(string)
	crv, _ := m["crv"].(string)
	switch {
	case kty == "OKP" && crv == "Ed25519":
		x, err := jwkBytes(m, "x", ed25519.PublicKeySize)
		if err != nil {
			return nil, err
		}
		return ed25519.PublicKey(x), nil
	case kty == "EC" && (crv == "P-256" || crv == "secp256k1"):
		x, err := jwkBytes(m, "x", 32)
		if err != nil {
			return nil, err
		}
		y, err := jwkBytes(m, "y", 32)
		if err != nil {
			return nil, err
		}
		u := append(append([]byte{4}, x...), y...)
		if crv == "P-256" {
			return parseP256Uncompressed(u)
		}
		pub, err := secp256k1.ParsePubKey(u)
		if err != nil {
			return nil, fmt.Errorf("%w: secp256k1 point not on curve", ErrUnsupportedKey)
		}
		return pub, nil
	default:
		return nil, fmt.Errorf("%w: JWK must be OKP Ed25519, EC P-256 or EC secp256k1", ErrUnsupportedKey)
	}
}

// jwkBytes decodes a base64url member of exactly n bytes. RFC 7518 fixes the
// lengths of x, y and d; shorter encodings (leading zeros dropped) are
// refused so that a key has one JWK form.
func jwkBytes(m map[string]any, name string, n int) ([]byte, error) {
	s, ok := m[name].(string)
	if !ok {
		return nil, fmt.Errorf("%w: JWK member %q missing or not a string", ErrUnsupportedKey, name)
	}
	b, err := decodeB64URL(s)
	if err != nil || len(b) != n {
		return nil, fmt.Errorf("%w: JWK member %q is not %d base64url bytes", ErrUnsupportedKey, name, n)
	}
	return b, nil
}

// decodeB64URL is strict base64url without padding. The standard decoder
// skips CR and LF, which would give one value several spellings.
func decodeB64URL(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, fmt.Errorf("%w: line breaks in base64url", ErrUnsupportedKey)
	}
	return base64.RawURLEncoding.Strict().DecodeString(s)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// resolveJWKDID builds the document of a did:jwk (did:jwk method spec). It
// does no I/O.
func resolveJWKDID(d DID) (*Document, error) {
	if d.Method != "jwk" {
		return nil, fmt.Errorf("%w: not a did:jwk", ErrUnsupportedMethod)
	}
	raw, err := decodeB64URL(d.ID)
	if err != nil {
		return nil, fmt.Errorf("%w: did:jwk id is not base64url", ErrInvalidDID)
	}
	// The JWK is the DID: two resolvers reading a repeated member
	// differently would derive different keys for it.
	if errors.Is(jsonscan.CheckMembers(raw), ErrRepeatedMember) {
		return nil, fmt.Errorf("%w: did:jwk id: %w", ErrInvalidDID, ErrRepeatedMember)
	}
	var jwk map[string]any
	if err := json.Unmarshal(raw, &jwk); err != nil || jwk == nil {
		return nil, fmt.Errorf("%w: did:jwk id is not a JSON object", ErrInvalidDID)
	}
	if _, err := parseJWK(jwk, false); err != nil {
		return nil, err
	}
	did := d.String()
	vm := VerificationMethod{ID: did + "#0", Type: "JsonWebKey2020", Controller: did, PublicKeyJwk: jwk}
	doc := &Document{
		Context:            []any{contextDIDv1, contextJWS2020},
		ID:                 did,
		VerificationMethod: []VerificationMethod{vm},
	}
	// The spec limits an "enc" key to keyAgreement, which this package does
	// not model, so such a key authorizes nothing here.
	switch use, present := jwk["use"]; {
	case !present || use == "sig":
		doc.Authentication = []MethodRef{{Ref: vm.ID}}
		doc.AssertionMethod = []MethodRef{{Ref: vm.ID}}
	case use == "enc":
	default:
		return nil, fmt.Errorf("%w: did:jwk JWK has an invalid \"use\"", ErrInvalidDID)
	}
	return doc, nil
}
