package challenge

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"testing"

	"filippo.io/edwards25519"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// TestSmallOrderAgentKeyRefused: under a did:key of the identity point (in
// each of its encodings) R = B, S = 1 is a signature of every challenge that
// crypto/ed25519 accepts, so anyone could answer for such an agent; the
// proof is refused.
func TestSmallOrderAgentKeyRefused(t *testing.T) {
	f := newFixture(t)
	one := make([]byte, 32)
	one[0] = 1
	forged := append(edwards25519.NewGeneratorPoint().Bytes(), one...)
	identity := make([]byte, 32)
	identity[0] = 1
	negZero := append([]byte(nil), identity...)
	negZero[31] |= 0x80 // x = 0 with the sign bit set
	pPlus1 := []byte{0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f} // y = p + 1
	for _, enc := range [][]byte{identity, negZero, pPlus1} {
		did, _, err := didresolver.KeyDID(ed25519.PublicKey(enc))
		if err != nil {
			t.Fatal(err)
		}
		sc := SignedChallenge{Challenge: "c", Nonce: "n", AgentDID: did, ProofValue: base64.RawURLEncoding.EncodeToString(forged)}
		msg, err := sc.SigningInput()
		if err != nil {
			t.Fatal(err)
		}
		if !ed25519.Verify(ed25519.PublicKey(enc), msg, forged) {
			t.Fatalf("%x: test forgery does not verify under crypto/ed25519", enc)
		}
		if kid, err := f.svc.checkProof(context.Background(), &sc); !errors.Is(err, ErrBadProof) {
			t.Errorf("%x: checkProof = %q, %v; want ErrBadProof", enc, kid, err)
		}
	}
}
