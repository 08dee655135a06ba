package didresolver

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"fmt"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/mr-tron/base58"
)

// Multicodec varint prefixes of the public key types did:key supports.
var (
	codecEd25519   = []byte{0xed, 0x01}
	codecSecp256k1 = []byte{0xe7, 0x01}
	codecP256      = []byte{0x80, 0x24}
)

// maxKeyIDLength bounds a did:key method-specific id before base58 decoding
// (which is quadratic). The longest supported key encodes to 49 characters.
const maxKeyIDLength = 128

const (
	contextDIDv1     = "https://www.w3.org/ns/did/v1"
	contextEd25519   = "https://w3id.org/security/suites/ed25519-2020/v1"
	contextSecp256k1 = "https://w3id.org/security/suites/secp256k1-2019/v1"
	contextJWS2020   = "https://w3id.org/security/suites/jws-2020/v1"
)

// resolveKeyDID builds the document of a did:key. It does no I/O.
func resolveKeyDID(d DID) (*Document, error) {
	if d.Method != "key" {
		return nil, fmt.Errorf("%w: not a did:key", ErrUnsupportedMethod)
	}
	// The id usually lies in a longer string (a credential's decoded
	// header and claims); the document is kept (keycache.go), so it takes
	// its strings from a copy, not from that string.
	did := d.String()
	mb := did[len(did)-len(d.ID):]
	if len(mb) < 2 || mb[0] != 'z' || len(mb) > maxKeyIDLength {
		return nil, fmt.Errorf("%w: did:key id must be a base58btc multibase key", ErrInvalidDID)
	}
	raw, err := decodeBase58(mb[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: did:key id is not valid base58btc", ErrInvalidDID)
	}
	pub, err := decodeMulticodecKey(raw)
	if err != nil {
		return nil, err
	}
	return keyDocument(did, mb, pub)
}

// keyDocument expands a did:key into its document. Ed25519 uses the 2020
// suite (what MCP-I agents and the kya-os vectors expect); the ECDSA curves
// use JWK-based suites because their multibase forms are less widely
// understood by verifiers.
func keyDocument(did, mb string, pub crypto.PublicKey) (*Document, error) {
	vm := VerificationMethod{ID: did + "#" + mb, Controller: did}
	ctx := []any{contextDIDv1}
	switch pub.(type) {
	case ed25519.PublicKey:
		vm.Type = "Ed25519VerificationKey2020"
		vm.PublicKeyMultibase = mb
		ctx = append(ctx, contextEd25519)
	case *secp256k1.PublicKey:
		vm.Type = "EcdsaSecp256k1VerificationKey2019"
		ctx = append(ctx, contextSecp256k1)
	default:
		vm.Type = "JsonWebKey2020"
		ctx = append(ctx, contextJWS2020)
	}
	if vm.PublicKeyMultibase == "" {
		jwk, err := PublicJWK(pub)
		if err != nil {
			return nil, err
		}
		vm.PublicKeyJwk = jwk
	}
	return &Document{
		Context:            ctx,
		ID:                 did,
		VerificationMethod: []VerificationMethod{vm},
		Authentication:     []MethodRef{{Ref: vm.ID}},
		AssertionMethod:    []MethodRef{{Ref: vm.ID}},
	}, nil
}

// KeyDID returns the did:key DID and its verification method id for a public
// key (ed25519.PublicKey, *ecdsa.PublicKey P-256, *secp256k1.PublicKey).
func KeyDID(pub crypto.PublicKey) (did, kid string, err error) {
	mb, err := encodeMultibaseKey(pub)
	if err != nil {
		return "", "", err
	}
	did = "did:key:" + mb
	return did, did + "#" + mb, nil
}

// decodeBase58 refuses non-canonical spellings so that one key has exactly
// one did:key.
func decodeBase58(s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: empty base58", ErrUnsupportedKey)
	}
	b, err := base58.Decode(s)
	if err != nil || base58.Encode(b) != s {
		return nil, fmt.Errorf("%w: invalid base58", ErrUnsupportedKey)
	}
	return b, nil
}

// decodeMultibaseKey decodes a base58btc multibase, multicodec-prefixed key.
func decodeMultibaseKey(s string) (crypto.PublicKey, error) {
	if len(s) < 2 || s[0] != 'z' || len(s) > maxKeyIDLength {
		return nil, fmt.Errorf("%w: publicKeyMultibase must be base58btc ('z')", ErrUnsupportedKey)
	}
	raw, err := decodeBase58(s[1:])
	if err != nil {
		return nil, err
	}
	return decodeMulticodecKey(raw)
}

func decodeMulticodecKey(b []byte) (crypto.PublicKey, error) {
	switch {
	case bytes.HasPrefix(b, codecEd25519):
		return parseEd25519(b[len(codecEd25519):])
	case bytes.HasPrefix(b, codecSecp256k1):
		return parseSecp256k1Compressed(b[len(codecSecp256k1):])
	case bytes.HasPrefix(b, codecP256):
		return parseP256Compressed(b[len(codecP256):])
	default:
		return nil, fmt.Errorf("%w: multicodec is not Ed25519, secp256k1 or P-256", ErrUnsupportedKey)
	}
}

func encodeMultibaseKey(pub crypto.PublicKey) (string, error) {
	var prefix, key []byte
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return "", fmt.Errorf("%w: Ed25519 key length %d", ErrUnsupportedKey, len(k))
		}
		prefix, key = codecEd25519, k
	case *secp256k1.PublicKey:
		if k == nil {
			return "", fmt.Errorf("%w: nil key", ErrUnsupportedKey)
		}
		prefix, key = codecSecp256k1, k.SerializeCompressed()
	case *ecdsa.PublicKey:
		c, err := compressP256(k)
		if err != nil {
			return "", err
		}
		prefix, key = codecP256, c
	default:
		return "", fmt.Errorf("%w: key type %T", ErrUnsupportedKey, pub)
	}
	return "z" + base58.Encode(append(append([]byte{}, prefix...), key...)), nil
}

func parseEd25519(b []byte) (ed25519.PublicKey, error) {
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: Ed25519 key must be %d bytes", ErrUnsupportedKey, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(bytes.Clone(b)), nil
}

func parseSecp256k1Compressed(b []byte) (*secp256k1.PublicKey, error) {
	if len(b) != 33 || b[0] != 2 && b[0] != 3 {
		return nil, fmt.Errorf("%w: secp256k1 key must be 33 bytes compressed", ErrUnsupportedKey)
	}
	pub, err := secp256k1.ParsePubKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: secp256k1 point not on curve", ErrUnsupportedKey)
	}
	return pub, nil
}

func parseP256Compressed(b []byte) (*ecdsa.PublicKey, error) {
	if len(b) != 33 || b[0] != 2 && b[0] != 3 {
		return nil, fmt.Errorf("%w: P-256 key must be 33 bytes compressed", ErrUnsupportedKey)
	}
	x, y := elliptic.UnmarshalCompressed(elliptic.P256(), b)
	if x == nil {
		return nil, fmt.Errorf("%w: P-256 point not on curve", ErrUnsupportedKey)
	}
	u := make([]byte, 65)
	u[0] = 4
	x.FillBytes(u[1:33])
	y.FillBytes(u[33:])
	return parseP256Uncompressed(u)
}

func parseP256Uncompressed(u []byte) (*ecdsa.PublicKey, error) {
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), u)
	if err != nil {
		return nil, fmt.Errorf("%w: P-256 point not on curve", ErrUnsupportedKey)
	}
	return pub, nil
}

// p256Bytes returns the uncompressed point, refusing other curves so that a
// P-384 key is never mislabelled as P-256.
func p256Bytes(k *ecdsa.PublicKey) ([]byte, error) {
	if k == nil || k.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: ECDSA key is not on P-256", ErrUnsupportedKey)
	}
	u, err := k.Bytes()
	if err != nil || len(u) != 65 {
		return nil, fmt.Errorf("%w: invalid P-256 key", ErrUnsupportedKey)
	}
	return u, nil
}

func compressP256(k *ecdsa.PublicKey) ([]byte, error) {
	u, err := p256Bytes(k)
	if err != nil {
		return nil, err
	}
	c := make([]byte, 33)
	c[0] = 2 | u[64]&1
	copy(c[1:], u[1:33])
	return c, nil
}
