package challenge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// binderContract runs the SessionBinder checks every store must pass.
// expire makes a binding made with ttl short be gone (advance a clock, or
// wait).
func binderContract(t *testing.T, b SessionBinder, nonces NonceStore, short time.Duration, expire func()) {
	ctx := context.Background()
	t.Run("bind lookup", func(t *testing.T) {
		if _, err := b.Lookup(ctx, "k1"); !errors.Is(err, ErrBindingNotFound) {
			t.Fatalf("Lookup before Bind = %v, want ErrBindingNotFound", err)
		}
		if err := b.Bind(ctx, "k1", []byte(`{"agt":"a"}`), time.Minute); err != nil {
			t.Fatalf("Bind: %v", err)
		}
		for range 2 { // a lookup does not consume
			got, err := b.Lookup(ctx, "k1")
			if err != nil || string(got) != `{"agt":"a"}` {
				t.Fatalf("Lookup = %q, %v", got, err)
			}
		}
	})
	t.Run("rebind replaces", func(t *testing.T) {
		if err := b.Bind(ctx, "k2", []byte("old"), time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := b.Bind(ctx, "k2", []byte("new"), time.Minute); err != nil {
			t.Fatalf("second Bind: %v", err)
		}
		if got, err := b.Lookup(ctx, "k2"); err != nil || string(got) != "new" {
			t.Fatalf("Lookup = %q, %v", got, err)
		}
	})
	t.Run("value copied", func(t *testing.T) {
		v := []byte("abc")
		if err := b.Bind(ctx, "k3", v, time.Minute); err != nil {
			t.Fatal(err)
		}
		v[0] = 'X'
		if got, _ := b.Lookup(ctx, "k3"); string(got) != "abc" {
			t.Fatalf("Lookup = %q: the store kept the caller's slice", got)
		}
	})
	t.Run("apart from nonces", func(t *testing.T) {
		if err := b.Bind(ctx, "shared", []byte("binding"), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := nonces.Consume(ctx, "shared"); !errors.Is(err, ErrNonceNotFound) {
			t.Fatalf("Consume of a bound key = %v, want ErrNonceNotFound", err)
		}
		if err := nonces.Put(ctx, "shared", Record{Challenge: "c"}, time.Minute); err != nil {
			t.Fatalf("Put under a bound key: %v", err)
		}
		if got, err := b.Lookup(ctx, "shared"); err != nil || string(got) != "binding" {
			t.Fatalf("Lookup after a Put = %q, %v", got, err)
		}
		if _, err := b.Lookup(ctx, "sess:shared"); !errors.Is(err, ErrBindingNotFound) {
			t.Fatalf("Lookup of the prefixed name = %v", err)
		}
	})
	t.Run("ttl", func(t *testing.T) {
		if err := b.Bind(ctx, "short", []byte("v"), short); err != nil {
			t.Fatal(err)
		}
		if err := b.Bind(ctx, "long", []byte("v"), time.Hour); err != nil {
			t.Fatal(err)
		}
		expire()
		if _, err := b.Lookup(ctx, "short"); !errors.Is(err, ErrBindingNotFound) {
			t.Fatalf("Lookup after the TTL = %v, want ErrBindingNotFound", err)
		}
		if _, err := b.Lookup(ctx, "long"); err != nil {
			t.Fatalf("live binding gone: %v", err)
		}
		if err := b.Bind(ctx, "zero", []byte("v"), 0); err == nil || errors.Is(err, ErrStoreUnavailable) {
			t.Fatalf("Bind with zero ttl = %v, want a plain error", err)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					k := fmt.Sprint("c", i)
					if err := b.Bind(ctx, k, []byte(fmt.Sprint(w)), time.Minute); err != nil {
						t.Errorf("Bind: %v", err)
					}
					if _, err := b.Lookup(ctx, k); err != nil {
						t.Errorf("Lookup: %v", err)
					}
				}
			}()
		}
		wg.Wait()
	})
}

func TestMemoryBinder(t *testing.T) {
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(context.Background(), WithMemoryClock(clock.Now))
	defer m.Close()
	binderContract(t, m, m, 10*time.Second, func() { clock.Advance(10 * time.Second) })
	if m.Len() != 1 {
		t.Errorf("Len = %d: bindings counted as nonce records", m.Len())
	}
}

func TestMemoryBinderBounded(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now), WithMaxEntries(2))
	defer m.Close()
	if err := m.Bind(ctx, "a", []byte("1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := m.Bind(ctx, "b", []byte("2"), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Rebinding a held key needs no room.
	if err := m.Bind(ctx, "a", []byte("1"), time.Minute); err != nil {
		t.Fatalf("rebind in a full store: %v", err)
	}
	err := m.Bind(ctx, "c", []byte("3"), time.Minute)
	if !errors.Is(err, ErrStoreFull) || !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Bind when full = %v, want ErrStoreFull", err)
	}
	// Nonce records have a bound of their own.
	for _, n := range []string{"n1", "n2"} {
		if err := m.Put(ctx, n, testRecord(clock.Now), time.Minute); err != nil {
			t.Fatalf("Put with the bindings full: %v", err)
		}
	}
	// The first binding expires: it makes room, and only it goes.
	clock.Advance(time.Minute)
	if err := m.Bind(ctx, "c", []byte("3"), time.Minute); err != nil {
		t.Fatalf("Bind after expiry: %v", err)
	}
	if _, err := m.Lookup(ctx, "b"); err != nil {
		t.Fatalf("live binding evicted: %v", err)
	}
	if m.Bindings() != 2 {
		t.Fatalf("Bindings = %d, want 2", m.Bindings())
	}
}

func TestMemoryBinderJanitorAndClose(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now), WithJanitorInterval(5*time.Millisecond))
	for i := range 10 {
		if err := m.Bind(ctx, fmt.Sprint(i), []byte("v"), time.Duration(1+i%2)*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(1500 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for m.Bindings() != 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if m.Bindings() != 5 {
		t.Fatalf("janitor left %d bindings, want 5", m.Bindings())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Bind(ctx, "x", []byte("v"), time.Minute); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Bind after Close = %v", err)
	}
	if _, err := m.Lookup(ctx, "1"); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Lookup after Close = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	m2 := NewMemoryStore(ctx)
	defer m2.Close()
	if _, err := m2.Lookup(cctx, "x"); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Lookup with a cancelled context = %v", err)
	}
}

func TestRedisBinder(t *testing.T) {
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr())
	binderContract(t, s, s, 150*time.Millisecond, func() { time.Sleep(400 * time.Millisecond) })

	ctx := context.Background()
	t.Run("key layout", func(t *testing.T) {
		if err := s.Bind(ctx, "ab12", []byte("v"), time.Minute); err != nil {
			t.Fatal(err)
		}
		name := s.prefix + "sess:ab12"
		got, err := s.client.Get(ctx, name).Result()
		if err != nil || got != "v" {
			t.Fatalf("GET %s = %q, %v", name, got, err)
		}
		ttl, err := s.client.PTTL(ctx, name).Result()
		if err != nil || ttl <= 0 || ttl > time.Minute {
			t.Fatalf("PTTL %s = %v, %v", name, ttl, err)
		}
	})
	t.Run("replicas share", func(t *testing.T) {
		other, err := NewRedisStore(RedisOptions{Addr: srv.Addr(), KeyPrefix: s.prefix})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if err := s.Bind(ctx, "shared-session", []byte("who"), time.Minute); err != nil {
			t.Fatal(err)
		}
		if got, err := other.Lookup(ctx, "shared-session"); err != nil || string(got) != "who" {
			t.Fatalf("Lookup at the other replica = %q, %v", got, err)
		}
		foreign, err := NewRedisStore(RedisOptions{Addr: srv.Addr(), KeyPrefix: "another:"})
		if err != nil {
			t.Fatal(err)
		}
		defer foreign.Close()
		if _, err := foreign.Lookup(ctx, "shared-session"); !errors.Is(err, ErrBindingNotFound) {
			t.Fatalf("store with another prefix saw the binding: %v", err)
		}
	})
	t.Run("outage", func(t *testing.T) {
		srv.Stop()
		if err := s.Bind(ctx, "k", []byte("v"), time.Minute); !errors.Is(err, ErrStoreUnavailable) {
			t.Fatalf("Bind with Redis down = %v, want ErrStoreUnavailable", err)
		}
		if _, err := s.Lookup(ctx, "k1"); !errors.Is(err, ErrStoreUnavailable) || errors.Is(err, ErrBindingNotFound) {
			t.Fatalf("Lookup with Redis down = %v, want ErrStoreUnavailable", err)
		}
		srv.Restart()
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if err = s.Bind(ctx, "k", []byte("v"), time.Minute); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("Bind after Redis came back: %v", err)
		}
	})
}
