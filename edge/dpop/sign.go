package dpop

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
)

// NewProof makes a DPoP proof, as a client does, for one request: method
// and the absolute URL it is sent to (query and fragment are dropped, as
// RFC 9449 wants), accessToken the token sent with it ("" at the token
// endpoint), issued at iat with a random jti. priv is an ed25519.PrivateKey
// (EdDSA) or a P-256 *ecdsa.PrivateKey (ES256).
func NewProof(priv crypto.Signer, method, url, accessToken string, iat time.Time) (string, error) {
	var alg jwa.SignatureAlgorithm
	switch k := priv.(type) {
	case ed25519.PrivateKey:
		alg = jwa.EdDSA
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("dpop: NewProof: ECDSA keys must be on P-256")
		}
		alg = jwa.ES256
	default:
		return "", fmt.Errorf("dpop: NewProof: key type %T not supported: use Ed25519 or P-256", priv)
	}
	pub, err := jwk.FromRaw(priv.Public())
	if err != nil {
		return "", fmt.Errorf("dpop: NewProof: %w", err)
	}
	hdr := jws.NewHeaders()
	if err := hdr.Set(jws.TypeKey, "dpop+jwt"); err != nil {
		return "", err
	}
	if err := hdr.Set(jws.JWKKey, pub); err != nil {
		return "", err
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	cl := map[string]any{
		"jti": base64.RawURLEncoding.EncodeToString(nonce[:]),
		"htm": method,
		"htu": stripQuery(url),
		"iat": iat.Unix(),
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		cl["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	payload, err := json.Marshal(cl)
	if err != nil {
		return "", err
	}
	out, err := jws.Sign(payload, jws.WithKey(alg, priv, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		return "", fmt.Errorf("dpop: NewProof: %w", err)
	}
	return string(out), nil
}

func stripQuery(u string) string {
	for i := 0; i < len(u); i++ {
		if u[i] == '?' || u[i] == '#' {
			return u[:i]
		}
	}
	return u
}
