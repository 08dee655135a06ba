package challenge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func testRecord(clock func() time.Time) Record {
	now := clock()
	return Record{Challenge: "chal", AgentDID: testDID, IssuedAt: now, ExpiresAt: now.Add(time.Minute)}
}

func TestMemoryStorePutConsume(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now))
	defer m.Close()
	rec := testRecord(clock.Now)

	if err := m.Put(ctx, "n1", rec, time.Minute); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := m.Put(ctx, "n1", rec, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("second Put = %v, want ErrNonceExists", err)
	}
	got, err := m.Consume(ctx, "n1")
	if err != nil || got.Challenge != rec.Challenge || got.AgentDID != rec.AgentDID || !got.ExpiresAt.Equal(rec.ExpiresAt) {
		t.Fatalf("Consume = %+v, %v", got, err)
	}
	if _, err := m.Consume(ctx, "n1"); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("second Consume = %v, want ErrNonceNotFound", err)
	}
	if _, err := m.Consume(ctx, "never"); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("Consume unknown = %v", err)
	}
	if err := m.Put(ctx, "n2", rec, 0); err == nil {
		t.Fatal("Put with zero ttl succeeded")
	}
	if m.Len() != 0 {
		t.Fatalf("Len = %d", m.Len())
	}
}

func TestMemoryStorePeek(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now))
	rec := testRecord(clock.Now)
	if _, err := m.Peek(ctx, "n"); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("Peek unknown = %v", err)
	}
	if err := m.Put(ctx, "n", rec, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := m.Peek(ctx, "n")
		if err != nil || got != rec {
			t.Fatalf("Peek = %+v, %v", got, err)
		}
	}
	if got, err := m.Consume(ctx, "n"); err != nil || got != rec {
		t.Fatalf("Consume after Peek = %+v, %v", got, err)
	}
	if _, err := m.Peek(ctx, "n"); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("Peek after Consume = %v", err)
	}
	if err := m.Put(ctx, "old", rec, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if _, err := m.Peek(ctx, "old"); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("Peek after TTL = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Peek(cctx, "n"); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Peek with a done context = %v", err)
	}
	m.Close()
	if _, err := m.Peek(ctx, "n"); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Peek after Close = %v", err)
	}
}

func TestMemoryStoreTTL(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now))
	defer m.Close()
	if err := m.Put(ctx, "n", testRecord(clock.Now), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if _, err := m.Consume(ctx, "n"); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("Consume after TTL = %v, want ErrNonceNotFound", err)
	}
	// An expired record does not block a Put of the same nonce.
	if err := m.Put(ctx, "x", testRecord(clock.Now), time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	if err := m.Put(ctx, "x", testRecord(clock.Now), time.Second); err != nil {
		t.Fatalf("Put over expired record: %v", err)
	}
}

func TestMemoryStoreBounded(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now), WithMaxEntries(3))
	defer m.Close()
	for i := range 3 {
		ttl := time.Duration(i+1) * time.Minute
		if err := m.Put(ctx, fmt.Sprint(i), testRecord(clock.Now), ttl); err != nil {
			t.Fatal(err)
		}
	}
	err := m.Put(ctx, "full", testRecord(clock.Now), time.Minute)
	if !errors.Is(err, ErrStoreFull) || !errors.Is(err, ErrStoreUnavailable) || Code(err) != -32000 {
		t.Fatalf("Put when full = %v, want ErrStoreFull (-32000)", err)
	}
	// After the first expires, a new record evicts it, and only it.
	clock.Advance(time.Minute)
	if err := m.Put(ctx, "new", testRecord(clock.Now), time.Minute); err != nil {
		t.Fatalf("Put after expiry: %v", err)
	}
	if m.Len() != 3 {
		t.Fatalf("Len = %d, want 3", m.Len())
	}
	for _, n := range []string{"1", "2", "new"} {
		if _, err := m.Consume(ctx, n); err != nil {
			t.Fatalf("Consume %s: %v", n, err)
		}
	}
	if _, err := m.Consume(ctx, "0"); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("evicted record still there: %v", err)
	}
}

func TestMemoryStoreJanitor(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now), WithJanitorInterval(5*time.Millisecond))
	defer m.Close()
	for i := range 100 {
		if err := m.Put(ctx, fmt.Sprint(i), testRecord(clock.Now), time.Duration(1+i%2)*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(1500 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for m.Len() != 50 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if m.Len() != 50 {
		t.Fatalf("janitor left %d records, want 50", m.Len())
	}
	if _, err := m.Consume(ctx, "1"); err != nil {
		t.Fatalf("live record swept: %v", err)
	}
}

func TestMemoryStoreCloseAndContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := NewMemoryStore(ctx)
	cancel()
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
		t.Fatal("janitor did not stop when the context was cancelled")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	bg := context.Background()
	if err := m.Put(bg, "n", Record{}, time.Minute); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Put after Close = %v", err)
	}
	if _, err := m.Consume(bg, "n"); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Consume after Close = %v", err)
	}

	m2 := NewMemoryStore(bg)
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m2.done:
	default:
		t.Fatal("Close returned before the janitor stopped")
	}
	cctx, ccancel := context.WithCancel(bg)
	ccancel()
	m3 := NewMemoryStore(bg)
	defer m3.Close()
	if err := m3.Put(cctx, "n", Record{}, time.Minute); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Put with cancelled ctx = %v", err)
	}
}

func TestMemoryStoreConcurrentConsume(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryStore(ctx)
	defer m.Close()
	const nonces, workers = 20, 8
	for i := range nonces {
		if err := m.Put(ctx, fmt.Sprint(i), testRecord(time.Now), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	wins := map[string]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range nonces {
				if _, err := m.Consume(ctx, fmt.Sprint(i)); err == nil {
					mu.Lock()
					wins[fmt.Sprint(i)]++
					mu.Unlock()
				} else if !errors.Is(err, ErrNonceNotFound) {
					t.Errorf("Consume: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if len(wins) != nonces {
		t.Fatalf("%d nonces consumed, want %d", len(wins), nonces)
	}
	for n, w := range wins {
		if w != 1 {
			t.Fatalf("nonce %s consumed %d times", n, w)
		}
	}
}
