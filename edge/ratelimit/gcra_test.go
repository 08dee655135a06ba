package ratelimit

import (
	"context"
	"testing"
	"time"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newFake() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func TestGCRABurstThenSteadyRate(t *testing.T) {
	clk := newFake()
	m := NewMemory(0, clk.now)
	q := Quota{Interval: 100 * time.Millisecond, Burst: 3} // 10/s, burst 3
	ctx := context.Background()
	for i := range 3 {
		res, err := m.Take(ctx, "k", q, 1)
		if err != nil || !res.Allowed {
			t.Fatalf("call %d of the burst refused: %+v %v", i, res, err)
		}
		if res.Remaining != 2-i {
			t.Errorf("call %d: remaining %d, want %d", i, res.Remaining, 2-i)
		}
	}
	res, _ := m.Take(ctx, "k", q, 1)
	if res.Allowed || res.RetryAfter != 100*time.Millisecond {
		t.Fatalf("4th call at once: %+v, want refused with retry after 100ms", res)
	}
	clk.advance(99 * time.Millisecond)
	if res, _ := m.Take(ctx, "k", q, 1); res.Allowed || res.RetryAfter != time.Millisecond {
		t.Fatalf("1ms early: %+v, want refused, retry after 1ms", res)
	}
	clk.advance(time.Millisecond)
	if res, _ := m.Take(ctx, "k", q, 1); !res.Allowed {
		t.Fatalf("after the interval: refused %+v", res)
	}
	if res, _ := m.Take(ctx, "other", q, 1); !res.Allowed {
		t.Fatal("another key shares the counter")
	}
}

func TestGCRASeveralAtOnceAllOrNothing(t *testing.T) {
	clk := newFake()
	m := NewMemory(0, clk.now)
	q := Quota{Interval: time.Second, Burst: 5}
	ctx := context.Background()
	if res, _ := m.Take(ctx, "k", q, 4); !res.Allowed || res.Remaining != 1 {
		t.Fatalf("4 of 5: %+v", res)
	}
	res, _ := m.Take(ctx, "k", q, 2)
	if res.Allowed || res.RetryAfter != time.Second {
		t.Fatalf("2 more with 1 left: %+v, want refused, retry after 1s", res)
	}
	// The refused 2 took nothing: the one left is still there.
	if res, _ := m.Take(ctx, "k", q, 1); !res.Allowed {
		t.Fatalf("the last one: %+v", res)
	}
}

func TestGCRAGiveBack(t *testing.T) {
	clk := newFake()
	m := NewMemory(0, clk.now)
	q := Quota{Interval: time.Second, Burst: 2}
	ctx := context.Background()
	m.Take(ctx, "k", q, 2)
	if res, _ := m.Take(ctx, "k", q, 1); res.Allowed {
		t.Fatal("burst spent, yet allowed")
	}
	m.Take(ctx, "k", q, -1)
	if res, _ := m.Take(ctx, "k", q, 1); !res.Allowed {
		t.Fatal("a call given back was not available again")
	}
	// Giving back more than was taken never makes more than the burst.
	m.Take(ctx, "k", q, -100)
	if res, _ := m.Take(ctx, "k", q, 3); res.Allowed {
		t.Fatal("more than the burst allowed after a large give-back")
	}
}

func TestMemoryForgetsIdleKeysAndIsBounded(t *testing.T) {
	clk := newFake()
	m := NewMemory(2, clk.now)
	q := Quota{Interval: time.Second, Burst: 1}
	ctx := context.Background()
	m.Take(ctx, "a", q, 1)
	m.Take(ctx, "b", q, 1)
	if _, err := m.Take(ctx, "c", q, 1); err != ErrFull {
		t.Fatalf("third key in a store of two live keys: %v, want ErrFull", err)
	}
	// A key already held still counts when full.
	if res, err := m.Take(ctx, "a", q, 1); err != nil || res.Allowed {
		t.Fatalf("held key when full: %+v %v", res, err)
	}
	clk.advance(time.Second)
	if res, err := m.Take(ctx, "c", q, 1); err != nil || !res.Allowed {
		t.Fatalf("after the keys went idle: %+v %v", res, err)
	}
	if n := m.Len(); n != 1 {
		t.Errorf("store holds %d keys after the sweep, want 1", n)
	}
}
