package challenge

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// TestRedisClusterStore: every operation works on a Redis Cluster whatever
// node holds its key, the owned bindings' index included (a script that
// touched the bindings themselves would be refused: CROSSSLOT).
func TestRedisClusterStore(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 0)
	s := newWaitStore(t, RedisOptions{Addrs: c.Addrs()[:1], Cluster: true})
	if s.Kind() != RedisCluster {
		t.Fatalf("kind %q", s.Kind())
	}
	ownedContract(t, s)
	rec := Record{Challenge: "c", AgentDID: testDID}
	for i := range 30 { // 30 keys land on every one of 3 masters
		nonce := fmt.Sprintf("n-%d", i)
		if err := s.Put(ctx, nonce, rec, time.Minute); err != nil {
			t.Fatalf("Put %s: %v", nonce, err)
		}
		if _, err := s.Peek(ctx, nonce); err != nil {
			t.Fatalf("Peek %s: %v", nonce, err)
		}
		if _, err := s.Consume(ctx, nonce); err != nil {
			t.Fatalf("Consume %s: %v", nonce, err)
		}
		if _, err := s.Consume(ctx, nonce); !errors.Is(err, ErrNonceNotFound) {
			t.Fatalf("second Consume %s = %v", nonce, err)
		}
		d := digestOf(nonce)
		if err := s.UseOnce(ctx, d, time.Minute); err != nil {
			t.Fatalf("UseOnce %s: %v", nonce, err)
		}
		if err := s.UseOnce(ctx, d, time.Minute); !errors.Is(err, ErrNonceExists) {
			t.Fatalf("second UseOnce %s = %v", nonce, err)
		}
	}
	if p, err := s.EvictionPolicy(ctx); err != nil || p != NoEviction {
		t.Fatalf("EvictionPolicy = %q, %v", p, err)
	}
}
