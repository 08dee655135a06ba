package cache

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/cputime"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// BenchmarkVerifyCachedHit: a credential already verified under the same
// rules, with the rules built per call as the Caddy handler does.
func BenchmarkVerifyCachedHit(b *testing.B) {
	f := newFixture(b)
	raw := issue(b, f.ed, f.vc11Claims(f.ed))
	res := didresolver.NewCache(f.res, didresolver.WithCacheClock(func() time.Time { return fixedNow }))
	var hits atomic.Int64
	v := New(vc.NewVerifier(res, vc.WithClock(func() time.Time { return fixedNow })), 10000,
		WithObserver(func(hit bool) {
			if hit {
				hits.Add(1)
			}
		}))
	ctx := context.Background()
	if _, err := v.Verify(ctx, raw, vc.ForAudience(serverDID)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, raw, vc.ForAudience(serverDID)); err != nil {
			b.Fatal(err)
		}
	}
	if hits.Load() == 0 {
		b.Fatal("no hits")
	}
}

// BenchmarkResultCacheKey: the key of a hit (one SHA-256 over the rules and
// the token), the floor of BenchmarkVerifyCachedHit.
func BenchmarkResultCacheKey(b *testing.B) {
	f := newFixture(b)
	raw := issue(b, f.ed, f.vc11Claims(f.ed))
	call, err := f.verifier().Prepare(raw, []vc.CheckOption{vc.ForAudience(serverDID)})
	if err != nil {
		b.Fatal(err)
	}
	defer call.Release()
	var buf [maxKeyOnStack]byte
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		in, ok := call.AppendKey(buf[:0])
		if !ok {
			b.Fatal("bypassed")
		}
		keySink, _ = keySums(in, len(raw))
	}
}

// BenchmarkVerifyCacheMissDistinct: every call a credential not in the
// cache (4096 pre-minted, cycled through a cache of 1000: each is evicted
// before it comes round again).
func BenchmarkVerifyCacheMissDistinct(b *testing.B) {
	f := newFixture(b)
	m := f.minter(b)
	creds := make([][]byte, 4096)
	for i := range creds {
		creds[i] = m.mint(i)
	}
	res := didresolver.NewCache(f.res, didresolver.WithCacheClock(func() time.Time { return fixedNow }))
	var misses atomic.Int64
	v := New(vc.NewVerifier(res, vc.WithClock(func() time.Time { return fixedNow })), 1000,
		WithObserver(func(hit bool) {
			if !hit {
				misses.Add(1)
			}
		}))
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := v.Verify(ctx, creds[i%len(creds)], vc.ForAudience(serverDID)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(misses.Load())/float64(i), "misses/op")
}

var keySink resultKey

// BenchmarkVerifyMissEdDSA is configuration (c) of BENCHMARKS.md as the
// edge runs it: the verifier the edge provisions (this cache,
// status checking on, trusted issuer, audience per request) over
// didresolver.New in a didresolver.Cache, given a fresh did:key-issued
// EdDSA VC-JWT in the KYA-OS shape on every call, so that every call
// misses the result cache. The tokens are minted before the timer starts.
// The cache is full of others, as under sustained load, so it stores none
// of the pool's (admission.go). The edge's (c) never sends a token twice;
// the pool repeats, so its doorkeeper is given a single slot, in which
// each token forgets the one before: every token is new to the cache, and
// a hit fails the benchmark.
// Compare it with vc's BenchmarkEd25519Verify, the floor, in the same
// run.
func BenchmarkVerifyMissEdDSA(b *testing.B) {
	const cacheSize, poolSize = 1024, 4096
	issuer, agent, user := newKey(b), newKey(b), newKey(b)
	const audience = "did:web:127.0.0.1%3A8080"
	now := time.Now()
	tmpl := vc.Template{
		AgentDID:  agent.did,
		UserDID:   user.did,
		Audience:  []string{audience},
		Scopes:    []string{"greet:execute"},
		NotBefore: now.Add(-time.Minute),
		ExpiresAt: now.Add(6 * time.Hour),
	}
	// Filling: as many tokens again as the cache, four times over, so
	// that each of its shards (chosen by key) is full.
	const fill = 4 * cacheSize
	pool := make([][]byte, fill+poolSize)
	for i := range pool {
		tok, err := vc.IssueJWT(issuer.priv, issuer.kid, tmpl)
		if err != nil {
			b.Fatal(err)
		}
		pool[i] = []byte(tok)
	}
	var hits int
	v := New(vc.NewVerifier(didresolver.NewCache(didresolver.New()),
		vc.WithTrustedIssuers(issuer.did),
		vc.WithStatusLists(nil, false)),
		cacheSize,
		WithObserver(func(hit bool) {
			if hit {
				hits++
			}
		}))
	ctx := context.Background()
	checks := []vc.CheckOption{vc.ForAudience(audience)}
	verify := func(raw []byte) {
		d, err := v.Verify(ctx, raw, checks...)
		if err != nil {
			b.Fatal(err)
		}
		if d.AgentDID != agent.did {
			b.Fatal("wrong agent")
		}
	}
	v.door = doorkeeper{slots: make([]atomic.Uint32, 1)}
	for _, raw := range pool[:fill] {
		verify(raw)
	}
	if n := v.Len(); n != cacheSize {
		b.Fatalf("the cache holds %d, not %d", n, cacheSize)
	}
	pool = pool[fill:]
	hits = 0
	b.SetBytes(int64(len(pool[0])))
	b.ReportAllocs()
	i := 0
	cpu := cputime.Process()
	for b.Loop() {
		verify(pool[i])
		if i++; i == len(pool) {
			i = 0
		}
	}
	cputime.Report(b, cpu)
	if hits != 0 {
		b.Fatalf("%d calls hit the result cache", hits)
	}
}
