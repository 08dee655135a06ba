package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// Through a Redis Cluster nonce store's client, started from one node: the
// counters of many agents land on every master, and each holds its limit
// (one key per counter, so no script ever spans two slots).
func TestRedisClusterThroughNonceStore(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	ns, err := challenge.NewRedisStore(challenge.RedisOptions{Addrs: c.Addrs()[:1], Cluster: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	store, prefix := StoreFor(ns)
	if _, ok := store.(*Redis); !ok || prefix != challenge.DefaultRedisKeyPrefix+"ratelimit:" {
		t.Fatalf("StoreFor a Redis nonce store = %T, %q", store, prefix)
	}
	l, err := New([]Limit{{Key: []string{KeyAgent}, Rate: 2, Per: time.Hour}}, store, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 30 {
		caller := Caller{Agent: fmt.Sprintf("did:key:agent%d", i), User: "did:key:user"}
		for j := range 3 {
			v := l.Check(ctx, caller, []Call{{}})
			if v.Err != nil {
				t.Fatalf("agent %d call %d: %v", i, j, v.Err)
			}
			if v.Limited != (j == 2) {
				t.Fatalf("agent %d call %d: limited %v", i, j, v.Limited)
			}
		}
	}
	holding := 0
	for _, n := range c.Nodes {
		out, err := n.CLI("DBSIZE")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) != "0" {
			holding++
		}
	}
	if holding != 3 {
		t.Errorf("counters on %d of 3 masters, want every one", holding)
	}
}

// A memory nonce store (or none) gets the process's one memory store.
func TestStoreForMemory(t *testing.T) {
	ns := challenge.NewMemoryStore(context.Background())
	t.Cleanup(func() { ns.Close() })
	store, prefix := StoreFor(ns)
	if _, ok := store.(*Memory); !ok || prefix != "" {
		t.Errorf("StoreFor a memory nonce store = %T, prefix %q", store, prefix)
	}
	if s, _ := StoreFor(nil); s != store {
		t.Error("StoreFor(nil) is not the process's one memory store")
	}
}
