package ldproof

import (
	"crypto/ed25519"
	"errors"
	"testing"

	"filippo.io/edwards25519"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// TestSmallOrderKeyRefused: under the identity point R = B, S = 1 is a
// signature of every message that crypto/ed25519 accepts; a Linked Data
// proof under such a key must not verify.
func TestSmallOrderKeyRefused(t *testing.T) {
	identity := make(ed25519.PublicKey, 32)
	identity[0] = 1
	one := make([]byte, 32)
	one[0] = 1
	sig := append(edwards25519.NewGeneratorPoint().Bytes(), one...)
	msg := []byte("any canonical document")
	if !ed25519.Verify(identity, msg, sig) {
		t.Fatal("test forgery does not verify under crypto/ed25519")
	}
	err := verifySignature(algEdDSA, didresolver.Key{Public: identity}, msg, sig)
	if !errors.Is(err, ErrSignature) {
		t.Fatalf("verifySignature = %v, want ErrSignature", err)
	}
}
