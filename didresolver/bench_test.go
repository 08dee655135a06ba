package didresolver

import (
	"context"
	"crypto/ed25519"
	"testing"
)

func BenchmarkResolveDIDKey(b *testing.B) {
	did, kid, err := KeyDID(mustGenerate(b, Ed25519))
	if err != nil {
		b.Fatal(err)
	}
	r := New()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		doc, err := r.Resolve(ctx, did)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := doc.Key(kid, Authentication); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCacheHit(b *testing.B) {
	const did = "did:web:example.com"
	up := newCounting()
	up.set(did, edDoc(did, mustGenerate(b, Ed25519).(ed25519.PublicKey)), nil)
	c := NewCache(up)
	ctx := context.Background()
	if _, err := c.Resolve(ctx, did); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Resolve(ctx, did); err != nil {
				b.Fatal(err)
			}
		}
	})
	if n := up.total.Load(); n != 1 {
		b.Fatalf("%d upstream fetches", n)
	}
}
