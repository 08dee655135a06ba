package challenge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// A client's nonce that names a rate limit counter neither reads nor
// consumes it (which would give its caller a fresh burst), nor takes its
// place.
func TestRedisRateLimitKeysAreReserved(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr())
	client, prefix := s.RateLimitRedis()
	if prefix != s.prefix+"ratelimit:" {
		t.Fatalf("prefix %q", prefix)
	}
	if err := client.Set(ctx, prefix+"c0ffee", "1700000000000000", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Consume(ctx, "ratelimit:c0ffee"); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("Consume of a counter's name = %v, want ErrNonceNotFound", err)
	}
	if _, err := s.Peek(ctx, "ratelimit:c0ffee"); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("Peek of a counter's name = %v, want ErrNonceNotFound", err)
	}
	if err := s.Put(ctx, "ratelimit:other", Record{Challenge: "x"}, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("Put under a counter's name = %v, want ErrNonceExists", err)
	}
	if v, err := client.Get(ctx, prefix+"c0ffee").Result(); err != nil || v != "1700000000000000" {
		t.Fatalf("counter after the attempts: %q, %v", v, err)
	}
}
