package caddymodule

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// TestNonceStoreModulesSingleUse: both modules keep single-use markers in
// their pooled store, shared by the configurations that share it, and an
// unprovisioned module fails closed.
func TestNonceStoreModulesSingleUse(t *testing.T) {
	ctx, bg := bareContext(t), context.Background()
	d := sha256.Sum256([]byte("did:key:z\x00nonce"))

	a, b := &MemoryNonceStore{MaxEntries: 2}, &MemoryNonceStore{MaxEntries: 2}
	for _, s := range []*MemoryNonceStore{a, b} {
		if err := s.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Cleanup() })
	}
	redis := redistest.Start(t)
	r, u := &RedisNonceStore{Address: redis.Addr(), KeyPrefix: "test:"}, &RedisNonceStore{URL: "redis://" + redis.Addr() + "/0", KeyPrefix: "test:"}
	for _, s := range []*RedisNonceStore{r, u} {
		if err := s.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Cleanup() })
	}
	for _, pair := range [][2]challenge.SingleUse{{a, b}, {r, u}} {
		if err := pair[0].UseOnce(bg, d, time.Minute); err != nil {
			t.Fatalf("%T: first use: %v", pair[0], err)
		}
		if err := pair[1].UseOnce(bg, d, time.Minute); !errors.Is(err, challenge.ErrNonceExists) {
			t.Fatalf("%T: replay through the other configuration = %v, want ErrNonceExists", pair[1], err)
		}
	}
	// The memory module's bound holds for markers too.
	if err := b.UseOnce(bg, sha256.Sum256([]byte("2")), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.UseOnce(bg, sha256.Sum256([]byte("3")), time.Minute); !errors.Is(err, challenge.ErrStoreFull) {
		t.Fatalf("third marker in a store of 2 = %v, want ErrStoreFull", err)
	}
	for _, s := range []challenge.SingleUse{&MemoryNonceStore{}, &RedisNonceStore{}} {
		if err := s.UseOnce(bg, d, time.Minute); !errors.Is(err, challenge.ErrStoreUnavailable) {
			t.Errorf("%T unprovisioned: %v, want ErrStoreUnavailable", s, err)
		}
	}
}
