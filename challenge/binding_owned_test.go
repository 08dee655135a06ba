package challenge

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// ownedContract runs the OwnedBinder checks every store must pass.
func ownedContract(t *testing.T, b OwnedBinder) {
	ctx := context.Background()
	key := func(owner string, i int) string { return fmt.Sprintf("%s:%s-%d", KindDeclaration, owner, i) }
	bound := func(k string) bool {
		_, err := b.Lookup(ctx, k)
		if err != nil && !errors.Is(err, ErrBindingNotFound) {
			t.Fatalf("Lookup(%s): %v", k, err)
		}
		return err == nil
	}
	t.Run("an owner's oldest go first", func(t *testing.T) {
		for i := range 5 {
			if err := b.BindOwned(ctx, KindDeclaration, "alice", key("alice", i), []byte{1}, time.Minute, 3); err != nil {
				t.Fatalf("BindOwned %d: %v", i, err)
			}
		}
		for i, want := range []bool{false, false, true, true, true} {
			if got := bound(key("alice", i)); got != want {
				t.Errorf("alice's binding %d bound = %v, want %v", i, got, want)
			}
		}
	})
	t.Run("owners apart", func(t *testing.T) {
		if err := b.BindOwned(ctx, KindDeclaration, "bob", key("bob", 0), []byte{1}, time.Minute, 3); err != nil {
			t.Fatal(err)
		}
		for i := 5; i < 10; i++ {
			if err := b.BindOwned(ctx, KindDeclaration, "alice", key("alice", i), []byte{1}, time.Minute, 3); err != nil {
				t.Fatal(err)
			}
		}
		if !bound(key("bob", 0)) {
			t.Fatal("alice's bindings pushed out bob's")
		}
	})
	t.Run("rebinding a key counts once", func(t *testing.T) {
		for range 4 {
			if err := b.BindOwned(ctx, KindDeclaration, "carol", key("carol", 0), []byte{2}, time.Minute, 2); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.BindOwned(ctx, KindDeclaration, "carol", key("carol", 1), []byte{2}, time.Minute, 2); err != nil {
			t.Fatal(err)
		}
		if !bound(key("carol", 0)) || !bound(key("carol", 1)) {
			t.Fatal("a key bound again counted as more than one binding")
		}
	})
	t.Run("arguments", func(t *testing.T) {
		for _, tc := range []struct {
			kind, owner string
			ttl         time.Duration
			max         int
		}{{"", "o", time.Minute, 1}, {KindDeclaration, "", time.Minute, 1}, {KindDeclaration, "o", 0, 1}, {KindDeclaration, "o", time.Minute, 0}} {
			if err := b.BindOwned(ctx, tc.kind, tc.owner, "k", nil, tc.ttl, tc.max); err == nil {
				t.Errorf("BindOwned(%q, %q, %v, %d) = nil, want an error", tc.kind, tc.owner, tc.ttl, tc.max)
			}
		}
	})
}

func TestMemoryOwnedBinder(t *testing.T) {
	m := NewMemoryStore(context.Background())
	defer m.Close()
	ownedContract(t, m)
}

func TestRedisOwnedBinder(t *testing.T) {
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr())
	ownedContract(t, s)
	ctx := context.Background()
	t.Run("an owner's index lives as long as its newest binding", func(t *testing.T) {
		if err := s.BindOwned(ctx, KindDeclaration, "dave", "kyaos-decl:d", []byte{1}, 2*time.Second, 4); err != nil {
			t.Fatal(err)
		}
		keys, err := s.client.Keys(ctx, s.prefix+"own:"+KindDeclaration+":*").Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("owner indexes: %v, %v", keys, err)
		}
		for _, k := range keys {
			if ttl, err := s.client.PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
				t.Errorf("index %s has no expiry (%v, %v)", k, ttl, err)
			}
		}
	})
}

// TestMemoryPartitions: each kind of record and binding has a bound of its
// own, so that a flood of one cannot starve another.
func TestMemoryPartitions(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryStore(ctx, WithMaxEntries(10))
	defer m.Close()
	rec := Record{Challenge: "c"}
	for i := range 10 {
		if err := m.Put(ctx, fmt.Sprintf("nonce-%d", i), rec, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := m.Bind(ctx, fmt.Sprintf("proxy-%d", i), []byte{1}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Put(ctx, "nonce-x", rec, time.Minute); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("Put into a full partition = %v, want ErrStoreFull", err)
	}
	if err := m.Bind(ctx, "proxy-x", []byte{1}, time.Minute); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("Bind into a full partition = %v, want ErrStoreFull", err)
	}
	for _, kind := range []string{KindResume, KindPresentation, KindOAuthCode, KindOAuthRefresh} {
		if err := m.Put(ctx, kind+":t", rec, time.Minute); err != nil {
			t.Fatalf("a %s record beside full challenges: %v", kind, err)
		}
	}
	if err := m.BindOwned(ctx, KindDeclaration, "o", KindDeclaration+":s", []byte{1}, time.Minute, 4); err != nil {
		t.Fatalf("a declaration beside full proxy sessions: %v", err)
	}
	// A key that only looks like a kind is in the default partition.
	if err := m.Put(ctx, "kyaos-resumeX:t", rec, time.Minute); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("Put of a look-alike kind = %v, want ErrStoreFull", err)
	}
	// Consumed entries give their room back to their own partition.
	if _, err := m.Consume(ctx, "nonce-0"); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(ctx, "nonce-x", rec, time.Minute); err != nil {
		t.Fatalf("Put after a Consume freed room: %v", err)
	}
}

// TestMemoryOwnedExpiry: expired owned bindings leave their owner's count,
// so an owner whose bindings expire is not pushed out of new ones.
func TestMemoryOwnedExpiry(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m := NewMemoryStore(context.Background(), WithMemoryClock(func() time.Time { return now }))
	defer m.Close()
	ctx := context.Background()
	for i := range 3 {
		if err := m.BindOwned(ctx, KindDeclaration, "o", fmt.Sprintf("%s:%d", KindDeclaration, i), []byte{1}, time.Second, 3); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(2 * time.Second)
	m.mu.Lock()
	m.evictExpired(now)
	owners := len(m.owners)
	m.mu.Unlock()
	if owners != 0 {
		t.Fatalf("%d owners held after every binding expired", owners)
	}
	for i := 3; i < 6; i++ {
		if err := m.BindOwned(ctx, KindDeclaration, "o", fmt.Sprintf("%s:%d", KindDeclaration, i), []byte{1}, time.Minute, 3); err != nil {
			t.Fatal(err)
		}
	}
	for i := 3; i < 6; i++ {
		if _, err := m.Lookup(ctx, fmt.Sprintf("%s:%d", KindDeclaration, i)); err != nil {
			t.Fatalf("binding %d: %v", i, err)
		}
	}
}
