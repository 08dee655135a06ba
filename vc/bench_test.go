package vc

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/cputime"
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
	cpu := cputime.Process()
	for b.Loop() {
		if !ed25519.Verify(pub, input, sig) {
			b.Fatal("verify failed")
		}
	}
	cputime.Report(b, cpu)
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

// BenchmarkParseJWT: parsing alone (no key, no signature check) of a
// VC-JWT of the shape BenchmarkVerifyMissEdDSA verifies: the part of a
// miss that is this package's own.
func BenchmarkParseJWT(b *testing.B) {
	raw := benchVCJWT(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		if p, _, err := parseJWS(raw); err != nil || p == nil {
			b.Fatal(err)
		}
	}
	cputime.Report(b, cpu)
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
	cpu := cputime.Process()
	for b.Loop() {
		if !k.Verify(input, sig) {
			b.Fatal("verify failed")
		}
	}
	cputime.Report(b, cpu)
}
