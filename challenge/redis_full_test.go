package challenge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// A Redis that has reached its maxmemory under noeviction answers writes
// with OOM: the store is full, not down. Writes are refused as full (the
// reason the memory store gives), the store stays up in its health, and
// writes work again once Redis has room.
func TestRedisOutOfMemoryIsFull(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartWith(t, "--maxmemory-policy", "noeviction")
	s := newTestRedisStore(t, srv.Addr())
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = admin.Close() })
	// Any maxmemory below what Redis already uses refuses every write.
	if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	writes := map[string]func() error{
		"marker": func() error { return s.UseOnce(ctx, [32]byte{1}, time.Minute) },
		"record": func() error {
			return s.Put(ctx, "n1", Record{Challenge: "c", IssuedAt: now, ExpiresAt: now.Add(time.Minute)}, time.Minute)
		},
		"binding": func() error { return s.Bind(ctx, "b1", []byte("v"), time.Minute) },
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			err := write()
			if !errors.Is(err, ErrStoreFull) || !errors.Is(err, ErrRedisOutOfMemory) || !errors.Is(err, ErrStoreUnavailable) {
				t.Fatalf("write to a Redis out of memory = %v, want ErrStoreFull and ErrRedisOutOfMemory", err)
			}
			if h := s.Health(); !h.Up || h.Failures != 0 {
				t.Fatalf("health of a full store = %+v, want up, no failures", h)
			}
		})
	}
	if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.UseOnce(ctx, [32]byte{1}, time.Minute); err != nil {
		t.Fatalf("marker once Redis has room: %v", err)
	}
	// A Redis that cannot be reached is down, as before.
	srv.Stop()
	if err := s.UseOnce(ctx, [32]byte{2}, time.Minute); !errors.Is(err, ErrStoreUnavailable) || errors.Is(err, ErrStoreFull) {
		t.Fatalf("write to a stopped Redis = %v, want unavailable, not full", err)
	}
	if h := s.Health(); h.Up {
		t.Fatalf("health of a stopped store = %+v, want down", h)
	}
}
