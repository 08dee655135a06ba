package challenge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

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

// BenchmarkProofNonceMemory: one single-use proof nonce per op, as the
// proof gate keeps it, in a memory store holding a minute of them: as a
// marker (UseOnce), and as the record it was before (Put under the hex of
// the digest).
func BenchmarkProofNonceMemory(b *testing.B) {
	const held = 200_000 // about a minute at 3,300 proofs per second
	ctx := context.Background()
	digest := func(i int) [32]byte { return sha256.Sum256([]byte(fmt.Sprint("did:key:z6Mk\x00nonce-", i))) }
	for _, how := range []string{"marker", "record"} {
		b.Run(how, func(b *testing.B) {
			m := NewMemoryStore(ctx, WithMaxEntries(1<<22))
			defer m.Close()
			use := func(d [32]byte) error {
				if how == "marker" {
					return m.UseOnce(ctx, d, time.Minute)
				}
				now := time.Now()
				return m.Put(ctx, "kyaos-rp:"+hex.EncodeToString(d[:]), Record{
					Challenge: "kyaos-request-proof", AgentDID: "did:key:z6MkAgent", IssuedAt: now, ExpiresAt: now.Add(time.Minute),
				}, time.Minute)
			}
			for i := range held {
				if err := use(digest(-1 - i)); err != nil {
					b.Fatal(err)
				}
			}
			ds := make([][32]byte, 1<<16)
			for i := range ds {
				ds[i] = digest(i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i > 0 && i%len(ds) == 0 {
					b.StopTimer()
					for j := range ds {
						ds[j] = digest(i + j)
					}
					b.StartTimer()
				}
				if err := use(ds[i%len(ds)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkGCWithProofNonces: one full garbage collection of a process
// whose memory store holds a million proof nonces, as markers and as
// records: what every collection costs the whole process, every route.
func BenchmarkGCWithProofNonces(b *testing.B) {
	const held = 1_000_000
	ctx := context.Background()
	for _, how := range []string{"marker", "record"} {
		b.Run(how, func(b *testing.B) {
			m := NewMemoryStore(ctx, WithMaxEntries(held))
			defer m.Close()
			now := time.Now()
			for i := range held {
				d := sha256.Sum256([]byte(fmt.Sprint("did:key:z6Mk\x00nonce-", i)))
				var err error
				if how == "marker" {
					err = m.UseOnce(ctx, d, time.Hour)
				} else {
					err = m.Put(ctx, "kyaos-rp:"+hex.EncodeToString(d[:]), Record{
						Challenge: "kyaos-request-proof", AgentDID: fmt.Sprint("did:key:z6MkAgent", i%100), IssuedAt: now, ExpiresAt: now.Add(time.Hour),
					}, time.Hour)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			for b.Loop() {
				runtime.GC()
			}
			b.ReportMetric(float64(ms.HeapAlloc)/held, "heap-B/nonce")
			runtime.KeepAlive(m)
		})
	}
}

var redisBenchNonces atomic.Int64

// BenchmarkProofNonceRedis: one proof nonce per op in Redis, as a marker
// (SET key 1 NX PX) and as the JSON record it was before.
func BenchmarkProofNonceRedis(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	for _, how := range []string{"marker", "record"} {
		b.Run(how, func(b *testing.B) {
			s := newTestRedisStore(b, srv.Addr())
			b.ReportAllocs()
			for b.Loop() {
				// Unique across -count runs, which share the key prefix.
				d := sha256.Sum256([]byte(fmt.Sprint("did:key:z6Mk\x00nonce-", how, redisBenchNonces.Add(1))))
				var err error
				if how == "marker" {
					err = s.UseOnce(ctx, d, time.Minute)
				} else {
					now := time.Now()
					err = s.Put(ctx, "kyaos-rp-old:"+hex.EncodeToString(d[:]), Record{
						Challenge: "kyaos-request-proof", AgentDID: "did:key:z6MkAgent", IssuedAt: now, ExpiresAt: now.Add(time.Minute),
					}, time.Minute)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
