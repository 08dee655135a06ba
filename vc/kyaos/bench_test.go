package kyaos

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// BenchmarkVerify: one fresh proof checked per iteration (did:key agent,
// memory nonces), against one bare Ed25519 verification.
func BenchmarkVerify(b *testing.B) {
	a := newAgent(b, didresolver.Ed25519)
	now := time.Unix(1_800_000_000, 0)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		body, _, err := SignRequest([]byte(call), a.priv, SignOptions{KID: a.kid, Audience: aud, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		bodies[i] = body
	}
	v := NewVerifier(didresolver.NewCache(didresolver.New()), &memNonces{}, WithClock(func() time.Time { return now }))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := v.Verify(context.Background(), Request{Body: bodies[i], Audience: aud}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBareEd25519(b *testing.B) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	msg := []byte(call)
	sig := ed25519.Sign(priv, msg)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("bad")
		}
	}
}
