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
	r, u := &RedisNonceStore{RedisConfig: challenge.RedisConfig{Address: redis.Addr(), KeyPrefix: "test:"}}, &RedisNonceStore{RedisConfig: challenge.RedisConfig{URL: "redis://" + redis.Addr() + "/0", KeyPrefix: "test:"}}
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

// TestMemoryNonceStoreKeptAcrossBoundChange: a reload that changes
// max_entries provisions the new configuration before the old one is
// cleaned up, as Caddy does; the proof nonces used under the old one are
// still refused under the new one, and the new bound holds once the old
// configuration is gone.
func TestMemoryNonceStoreKeptAcrossBoundChange(t *testing.T) {
	ctx, bg := bareContext(t), context.Background()
	used := sha256.Sum256([]byte("did:key:z\x00used"))
	old := &MemoryNonceStore{MaxEntries: 3}
	if err := old.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Cleanup() })
	if err := old.UseOnce(bg, used, time.Minute); err != nil {
		t.Fatal(err)
	}
	reloaded := &MemoryNonceStore{MaxEntries: 2}
	if err := reloaded.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reloaded.Cleanup() })
	// While both are live, the larger bound holds: the old configuration
	// still serves.
	if err := old.UseOnce(bg, sha256.Sum256([]byte("2")), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := old.UseOnce(bg, sha256.Sum256([]byte("3")), time.Minute); err != nil {
		t.Fatalf("third marker under the old bound of 3: %v", err)
	}
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if err := reloaded.UseOnce(bg, used, time.Minute); !errors.Is(err, challenge.ErrNonceExists) {
		t.Fatalf("nonce used before the reload = %v, want ErrNonceExists", err)
	}
	// The new bound (2) now holds: three live markers, nothing more.
	if err := reloaded.UseOnce(bg, sha256.Sum256([]byte("4")), time.Minute); !errors.Is(err, challenge.ErrStoreFull) {
		t.Fatalf("marker over the new bound = %v, want ErrStoreFull", err)
	}
}
