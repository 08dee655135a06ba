package challenge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// Proxied challenges are bounded in Redis: past the bound within a
// challenge lifetime, Register is refused as a full store (the handshake
// gets 503) and writes nothing, so a flood of anonymous handshakes cannot
// grow a shared Redis until every caller sharing it is refused.
func TestRedisProxiedChallengesBounded(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	f := newFixture(t, WithStore(newTestRedisStore(t, srv.Addr())), WithProxyChallengeBound(3))
	long := "did:key:z6Mk" + strings.Repeat("a", 2000)
	for i := range 3 {
		hr := HandshakeResult{Challenge: fmt.Sprintf("c%04d", i), Nonce: fmt.Sprintf("n%04d", i)}
		if err := f.svc.Register(ctx, long, hr); err != nil {
			t.Fatalf("challenge %d within the bound: %v", i, err)
		}
	}
	before, _ := srv.CLI("DBSIZE")
	err := f.svc.Register(ctx, long, HandshakeResult{Challenge: "c9999", Nonce: "n9999"})
	if !errors.Is(err, ErrTooManyChallenges) || !errors.Is(err, ErrStoreFull) || Code(err) != CodeStoreUnavailable {
		t.Fatalf("challenge over the bound: %v, want ErrTooManyChallenges (a full store, -32000)", err)
	}
	if after, _ := srv.CLI("DBSIZE"); after != before {
		t.Fatalf("a refused challenge wrote to Redis: DBSIZE %q, then %q", strings.TrimSpace(before), strings.TrimSpace(after))
	}
	if out, _ := srv.CLI("EXISTS", "test:"+t.Name()+":n9999"); strings.TrimSpace(out) != "0" {
		t.Fatal("the refused challenge was recorded")
	}
	// A nonce naming the counter neither consumes (resets) it nor takes
	// its place.
	if _, err := f.svc.store.Consume(ctx, redisProxyCountKey); err == nil {
		t.Fatal("a nonce consumed the proxied challenges' counter")
	}
	if err := f.svc.Register(ctx, long, HandshakeResult{Challenge: "c9998", Nonce: redisProxyCountKey}); err == nil {
		t.Fatal("a challenge was recorded under the counter's name")
	}
	if out, _ := srv.CLI("GET", "test:"+t.Name()+":"+redisProxyCountKey); strings.TrimSpace(out) == "" {
		t.Fatal("the counter is gone")
	}
	// The memory store keeps its own bound (max_entries) and counts none.
	m := newFixture(t, WithProxyChallengeBound(1))
	for i := range 3 {
		if err := m.svc.Register(ctx, long, HandshakeResult{Challenge: fmt.Sprintf("c%04d", i), Nonce: fmt.Sprintf("n%04d", i)}); err != nil {
			t.Fatalf("memory store, challenge %d: %v", i, err)
		}
	}
}

// TestRedisProxiedChallengesOperatorBound: the store's proxied_challenges
// (sized by the operator for this Redis) wins over the bound the challenge
// service asks for.
func TestRedisProxiedChallengesOperatorBound(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	s, err := NewRedisStore(RedisOptions{Addr: srv.Addr(), KeyPrefix: "test:" + t.Name() + ":", ProxiedChallenges: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := range 2 {
		if err := s.CountChallenge(ctx, time.Minute, DefaultProxyChallengeBound); err != nil {
			t.Fatalf("challenge %d within the operator's bound: %v", i, err)
		}
	}
	if err := s.CountChallenge(ctx, time.Minute, DefaultProxyChallengeBound); !errors.Is(err, ErrTooManyChallenges) {
		t.Fatalf("challenge past proxied_challenges 2 = %v, want ErrTooManyChallenges", err)
	}
}
