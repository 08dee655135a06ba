package challenge

import (
	"context"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// benchHandshake runs, per op, a full handshake: Issue, the agent's
// SignChallenge, and Verify (did:key resolution, signature, nonce consume,
// VC-JWT verification).
func benchHandshake(b *testing.B, store NonceStore) {
	ctx := context.Background()
	f := newFixture(b)
	svc, err := New(WithStore(store), WithClock(f.clock.Now), WithResolver(f.resolver), WithCredentialVerifier(f.verifier))
	if err != nil {
		b.Fatal(err)
	}
	a := newAgent(b, didresolver.Ed25519)
	cred := f.credential(b, a.did, "tool:execute")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		hr, err := svc.Issue(ctx, HandshakeParams{AgentDID: a.did})
		if err != nil {
			b.Fatal(err)
		}
		sc, err := SignChallenge(a.priv, SignedChallenge{Challenge: hr.Challenge, Nonce: hr.Nonce, AgentDID: a.did, Timestamp: TimestampRFC3339(f.clock.Now())})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Verify(ctx, VerifyParams{SignedChallenge: sc, Credential: cred}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHandshakeMemory(b *testing.B) {
	store := NewMemoryStore(context.Background())
	defer store.Close()
	benchHandshake(b, store)
}

func BenchmarkHandshakeRedis(b *testing.B) {
	srv := redistest.Start(b)
	store := newTestRedisStore(b, srv.Addr())
	benchHandshake(b, store)
}
