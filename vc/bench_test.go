package vc

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/ed25519v"
)

// benchVerify measures Verify of raw through a cached resolver, as the
// edge runs it.
func benchVerify(b *testing.B, f *fixture, raw []byte) {
	b.Helper()
	cache := didresolver.NewCache(f.res, didresolver.WithCacheClock(func() time.Time { return fixedNow }))
	v := NewVerifier(cache, WithClock(func() time.Time { return fixedNow }))
	ctx := context.Background()
	if _, err := v.Verify(ctx, raw, ForAudience(serverDID)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, raw, ForAudience(serverDID)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyJWTEdDSA(b *testing.B) {
	f := newFixture(b)
	benchVerify(b, f, mint(b, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed)))
}

func BenchmarkVerifyJWTES256(b *testing.B) {
	f := newFixture(b)
	benchVerify(b, f, mint(b, f.p256.priv, header("ES256", f.p256.kid), f.vc11Claims(f.p256)))
}

func BenchmarkVerifyJWTES256K(b *testing.B) {
	f := newFixture(b)
	benchVerify(b, f, mint(b, f.k1.priv, header("ES256K", f.k1.kid), f.vc11Claims(f.k1)))
}

func BenchmarkVerifyJSONVC(b *testing.B) {
	f := newFixture(b)
	benchVerify(b, f, signEd25519JCS(b, f.ed, f.jsonCredential(f.ed), false))
}

func BenchmarkVerifyEddsaJCS2022(b *testing.B) {
	f := newFixture(b)
	benchVerify(b, f, signEddsaJCS2022(b, f.ed, f.jsonCredential(f.ed), nil))
}

// The floor: the bare signature checks over a signing input of the size of
// a KYA-OS VC-JWT.

func benchInput(b *testing.B) []byte {
	f := newFixture(b)
	tok := mint(b, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed))
	return tok[:len(tok)-87]
}

func BenchmarkEd25519Verify(b *testing.B) {
	input := benchInput(b)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	sig := ed25519.Sign(priv, input)
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		if !ed25519.Verify(pub, input, sig) {
			b.Fatal("verify failed")
		}
	}
	reportCPU(b, cpu)
}

func BenchmarkP256Verify(b *testing.B) {
	input := benchInput(b)
	priv, err := didresolver.GenerateKey(didresolver.P256)
	if err != nil {
		b.Fatal(err)
	}
	k := priv.(*ecdsa.PrivateKey)
	h := sha256.Sum256(input)
	sig, err := ecdsa.SignASN1(nil, k, h[:])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		h := sha256.Sum256(input)
		if !ecdsa.VerifyASN1(&k.PublicKey, h[:], sig) {
			b.Fatal("verify failed")
		}
	}
}

// BenchmarkVerifyChain3: a chain of three (two JSON VCs and an ES256
// VC-JWT) with the ancestors in a separate carrier.
func BenchmarkVerifyChain3(b *testing.B) {
	f := newFixture(b)
	ch := f.chain3(b, nil)
	cache := didresolver.NewCache(f.res, didresolver.WithCacheClock(func() time.Time { return fixedNow }))
	v := NewVerifier(cache, WithClock(func() time.Time { return fixedNow }))
	ctx := context.Background()
	checks := []CheckOption{ForAudience(serverDID), WithAncestors(ch.root, ch.middle)}
	if d, err := v.Verify(ctx, ch.leaf, checks...); err != nil || len(d.Chain) != 3 {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, ch.leaf, checks...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyVPJWT: an EdDSA VP-JWT around one EdDSA VC-JWT, with a
// nonce check.
func BenchmarkVerifyVPJWT(b *testing.B) {
	f := newFixture(b)
	leaf := signCred(b, f.ed, f.delegationVC(f.ed, f.agent.did, "d-1", "", "a"), true)
	raw := vpJWT(b, f.agent, [][]byte{leaf}, nil)
	cache := didresolver.NewCache(f.res, didresolver.WithCacheClock(func() time.Time { return fixedNow }))
	v := NewVerifier(cache, WithClock(func() time.Time { return fixedNow }))
	ctx := context.Background()
	checks := []CheckOption{ForAudience(serverDID), WithPresentationNonce(func(string, string) error { return nil })}
	if _, err := v.Verify(ctx, raw, checks...); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, raw, checks...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatusListCached: a JSON credential with a StatusList2021
// entry whose list (131072 bits) is cached.
func BenchmarkStatusListCached(b *testing.B) {
	f := newFixture(b)
	srv := newStatusServer(b)
	srv.set("/list", signEd25519JCS(b, f.ed, listCred(b, f.ed, statusURL("/list"), "revocation", false, 42), false))
	c := f.delegationVC(f.ed, f.agent.did, "d-1", "", "a")
	c["credentialStatus"] = statusEntryFor(statusURL("/list"), "revocation", false, "7")
	raw := signCred(b, f.ed, c, false)
	cache := didresolver.NewCache(f.res, didresolver.WithCacheClock(func() time.Time { return fixedNow }))
	v := NewVerifier(cache, WithClock(func() time.Time { return fixedNow }), WithStatusLists(srv.client(), true))
	ctx := context.Background()
	if _, err := v.Verify(ctx, raw, ForAudience(serverDID)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, raw, ForAudience(serverDID)); err != nil {
			b.Fatal(err)
		}
	}
	if n := srv.hitCount("/list"); n != 1 {
		b.Fatalf("list fetched %d times", n)
	}
}

// BenchmarkVerifyMissEdDSA is configuration (c) of BENCHMARKS.md as the
// edge runs it: the verifier the caddymodule provisions (result cache,
// status checking on, trusted issuer, audience per request) over
// didresolver.New in a didresolver.Cache, given a fresh did:key-issued
// EdDSA VC-JWT in the KYA-OS shape on every call, so that every call
// misses the result cache. The tokens are minted before the timer starts.
// The cache is full of others, as under sustained load, so it stores none
// of the pool's (admission.go). The edge's (c) never sends a token twice;
// the pool repeats, so its doorkeeper is given a single slot, in which
// each token forgets the one before: every token is new to the cache, and
// a hit fails the benchmark.
// Compare it with BenchmarkEd25519Verify, the floor, in the same run.
func BenchmarkVerifyMissEdDSA(b *testing.B) {
	const cacheSize, poolSize = 1024, 4096
	issuer := newKey(b, didresolver.Ed25519)
	agent := newKey(b, didresolver.Ed25519)
	user := newKey(b, didresolver.Ed25519)
	const audience = "did:web:127.0.0.1%3A8080"
	now := time.Now()
	tmpl := Template{
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
		tok, err := IssueJWT(issuer.priv, issuer.kid, tmpl)
		if err != nil {
			b.Fatal(err)
		}
		pool[i] = []byte(tok)
	}
	var hits int
	v := NewVerifier(didresolver.NewCache(didresolver.New()),
		WithTrustedIssuers(issuer.did),
		WithStatusLists(nil, false),
		WithResultCache(cacheSize),
		WithCacheObserver(func(hit bool) {
			if hit {
				hits++
			}
		}))
	ctx := context.Background()
	checks := []CheckOption{ForAudience(audience)}
	verify := func(raw []byte) {
		d, err := v.Verify(ctx, raw, checks...)
		if err != nil {
			b.Fatal(err)
		}
		if d.AgentDID != agent.did {
			b.Fatal("wrong agent")
		}
	}
	v.results.door = doorkeeper{slots: make([]atomic.Uint32, 1)}
	for _, raw := range pool[:fill] {
		verify(raw)
	}
	if n := v.results.Len(); n != cacheSize {
		b.Fatalf("the cache holds %d, not %d", n, cacheSize)
	}
	pool = pool[fill:]
	hits = 0
	b.SetBytes(int64(len(pool[0])))
	b.ReportAllocs()
	i := 0
	cpu := processCPU()
	for b.Loop() {
		verify(pool[i])
		if i++; i == len(pool) {
			i = 0
		}
	}
	reportCPU(b, cpu)
	if hits != 0 {
		b.Fatalf("%d calls hit the result cache", hits)
	}
}

// BenchmarkParseJWT: parsing alone (no key, no signature check) of a
// VC-JWT of the shape BenchmarkVerifyMissEdDSA verifies: the part of a
// miss that is this package's own.
func BenchmarkParseJWT(b *testing.B) {
	raw := benchVCJWT(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		if p, _, err := parseJWS(raw); err != nil || p == nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// BenchmarkEd25519VerifyTable is BenchmarkEd25519Verify through
// internal/ed25519v once the key has its table, as this package verifies a
// key it has seen a few times (a trusted issuer's).
func BenchmarkEd25519VerifyTable(b *testing.B) {
	input := benchInput(b)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	sig := ed25519.Sign(priv, input)
	k, err := ed25519v.NewPublicKey(pub)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		if !k.Verify(input, sig) {
			b.Fatal("verify failed")
		}
	}
	reportCPU(b, cpu)
}
