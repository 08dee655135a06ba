package ldproof

import (
	"context"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// BenchmarkLDVerifyEd25519Signature2020 verifies a KYA-OS
// DelegationCredential (credentials v1 + KYA context) with a JSON-LD
// Ed25519Signature2020 proof: two URDNA2015 canonicalizations and one
// Ed25519 verification.
func BenchmarkLDVerifyEd25519Signature2020(b *testing.B) {
	v := newVerifier(b)
	ed := newKey(b, didresolver.Ed25519)
	doc := delegation("did:key:issuer")
	doc["@context"] = append(doc["@context"].([]any), "https://w3id.org/security/suites/ed25519-2020/v1")
	raw := mustJSON(b, signLD(b, signerLoader(b, nil), doc, TypeEd25519Signature2020, algEdDSA, ed))
	ctx := context.Background()
	if err := v.Verify(ctx, raw, ed.key); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := v.Verify(ctx, raw, ed.key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLDVerifyW3CVector verifies the W3C vc-di-eddsa eddsa-rdfc-2022
// vector (credentials v2).
func BenchmarkLDVerifyW3CVector(b *testing.B) {
	v := newVerifier(b)
	raw := readFile(b, "testdata/w3c-eddsa-rdfc-2022.json")
	key := multikeyEd25519(b, "z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(ctx, raw, key); err != nil {
			b.Fatal(err)
		}
	}
}
