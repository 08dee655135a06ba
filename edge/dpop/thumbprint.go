package dpop

import (
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

// Thumbprint returns the RFC 7638 SHA-256 thumbprint of key's public part,
// base64url without padding: the value of a bound token's cnf.jkt and of
// Proof.JKT.
func Thumbprint(key jwk.Key) (string, error) {
	if key == nil {
		return "", errors.New("dpop: thumbprint of a nil key")
	}
	pub, err := key.PublicKey()
	if err != nil {
		return "", fmt.Errorf("dpop: thumbprint: %w", err)
	}
	sum, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("dpop: thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}
