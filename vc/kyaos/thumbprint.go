package kyaos

import (
	"crypto"
	"crypto/sha256"
	"encoding/base64"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// Thumbprint is the RFC 7638 thumbprint of a public key, base64url: the
// SHA-256 of its required JWK members {crv, kty, x[, y]} in lexicographic
// order (what cnf.jkt holds).
func Thumbprint(pub crypto.PublicKey) (string, error) {
	jwk, err := didresolver.PublicJWK(pub)
	if err != nil {
		return "", err
	}
	// The values are base64url and fixed names: no escaping is needed.
	s := `{"crv":"` + jwk["crv"].(string) + `","kty":"` + jwk["kty"].(string) + `","x":"` + jwk["x"].(string) + `"`
	if y, ok := jwk["y"].(string); ok {
		s += `,"y":"` + y + `"`
	}
	s += "}"
	sum := sha256.Sum256([]byte(s))
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}
