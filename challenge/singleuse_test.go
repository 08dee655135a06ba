package challenge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

func digestOf(s string) [32]byte { return sha256.Sum256([]byte(s)) }

func TestMemoryStoreUseOnce(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now))
	defer m.Close()
	a, b := digestOf("a"), digestOf("b")

	if err := m.UseOnce(ctx, a, time.Minute); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if err := m.UseOnce(ctx, a, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("replay = %v, want ErrNonceExists", err)
	}
	if err := m.UseOnce(ctx, b, time.Minute); err != nil {
		t.Fatalf("another digest: %v", err)
	}
	// Markers are not records: a nonce named like one is another thing.
	if m.Len() != 0 || m.SingleUses() != 2 {
		t.Fatalf("Len = %d, SingleUses = %d; want 0 and 2", m.Len(), m.SingleUses())
	}
	if _, err := m.Consume(ctx, hex.EncodeToString(a[:])); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("Consume of a marker's digest = %v, want ErrNonceNotFound", err)
	}
	// Still refused just before its expiry, usable again at it.
	clock.Advance(time.Minute - time.Nanosecond)
	if err := m.UseOnce(ctx, a, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("replay before expiry = %v, want ErrNonceExists", err)
	}
	clock.Advance(time.Nanosecond)
	if err := m.UseOnce(ctx, a, time.Minute); err != nil {
		t.Fatalf("use after expiry: %v", err)
	}
	if err := m.UseOnce(ctx, a, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("replay of the new marker = %v, want ErrNonceExists", err)
	}

	if err := m.UseOnce(ctx, digestOf("z"), 0); err == nil || errors.Is(err, ErrNonceExists) {
		t.Fatalf("zero ttl = %v, want an error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.UseOnce(cctx, digestOf("c"), time.Minute); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("cancelled context = %v, want ErrStoreUnavailable", err)
	}
	m.Close()
	if err := m.UseOnce(ctx, digestOf("c"), time.Minute); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("after Close = %v, want ErrStoreUnavailable", err)
	}
}

func TestMemoryStoreUseOnceBounded(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now), WithMaxEntries(3))
	defer m.Close()
	for i := range 3 {
		if err := m.UseOnce(ctx, digestOf(fmt.Sprint(i)), time.Duration(i+1)*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	err := m.UseOnce(ctx, digestOf("full"), time.Minute)
	if !errors.Is(err, ErrStoreFull) || !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("use when full = %v, want ErrStoreFull", err)
	}
	// Full, the replay of a live marker is still told apart.
	if err := m.UseOnce(ctx, digestOf("1"), time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("replay when full = %v, want ErrNonceExists", err)
	}
	// Records and bindings are counted apart.
	if err := m.Put(ctx, "rec", testRecord(clock.Now), time.Minute); err != nil {
		t.Fatalf("Put beside full markers: %v", err)
	}
	// The first marker expired: a new one takes its room, and only its.
	clock.Advance(time.Minute)
	if err := m.UseOnce(ctx, digestOf("new"), time.Minute); err != nil {
		t.Fatalf("use after the first expired: %v", err)
	}
	if m.SingleUses() != 3 {
		t.Fatalf("SingleUses = %d, want 3", m.SingleUses())
	}
	for _, d := range []string{"1", "2", "new"} {
		if err := m.UseOnce(ctx, digestOf(d), time.Minute); !errors.Is(err, ErrNonceExists) {
			t.Fatalf("live marker %s: %v, want ErrNonceExists", d, err)
		}
	}
}

// TestMemoryStoreUseOnceRing: the ring of markers wraps and grows with
// markers expiring in the order they were made.
func TestMemoryStoreUseOnceRing(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	clock := newFakeClock(t0)
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now), WithMaxEntries(4*usedRingStart), WithJanitorInterval(time.Hour))
	defer m.Close()
	use := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if err := m.UseOnce(ctx, digestOf(prefix+fmt.Sprint(i)), 10*time.Second); err != nil {
				t.Fatalf("%s%d: %v", prefix, i, err)
			}
		}
	}
	half := usedRingStart / 2
	use("a", half) // expire at t0+10s
	clock.Advance(5 * time.Second)
	use("b", half) // t0+15s; the ring is full
	clock.Advance(6 * time.Second)
	m.used.sweep(clock.Now()) // drops a*: the next markers wrap around
	use("c", usedRingStart+half)
	if got := m.SingleUses(); got != 2*usedRingStart {
		t.Fatalf("SingleUses = %d, want %d", got, 2*usedRingStart)
	}
	clock.Advance(5 * time.Second) // t0+16s: b* expired, c* live
	m.used.sweep(clock.Now())
	if got := m.SingleUses(); got != usedRingStart+half {
		t.Fatalf("after b* expired: SingleUses = %d, want %d", got, usedRingStart+half)
	}
	for i := 0; i < usedRingStart+half; i += 97 {
		if err := m.UseOnce(ctx, digestOf("c"+fmt.Sprint(i)), time.Second); !errors.Is(err, ErrNonceExists) {
			t.Fatalf("c%d: %v, want ErrNonceExists", i, err)
		}
	}
	if err := m.UseOnce(ctx, digestOf("b0"), time.Second); err != nil {
		t.Fatalf("b0 after expiry: %v", err)
	}
}

// TestMemoryStoreUseOnceMixedTTL: a marker used again after its short ttl
// keeps its new expiry when the older slot of it leaves the ring.
func TestMemoryStoreUseOnceMixedTTL(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now), WithJanitorInterval(time.Hour))
	defer m.Close()
	long, short := digestOf("long"), digestOf("short")
	if err := m.UseOnce(ctx, long, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := m.UseOnce(ctx, short, time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	if err := m.UseOnce(ctx, short, 100*time.Second); err != nil {
		t.Fatalf("short after its ttl: %v", err)
	}
	clock.Advance(time.Minute)
	m.used.sweep(clock.Now()) // drops long and short's first slot
	if err := m.UseOnce(ctx, short, time.Second); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("short's second marker = %v, want ErrNonceExists", err)
	}
	if err := m.UseOnce(ctx, long, time.Second); err != nil {
		t.Fatalf("long after its ttl: %v", err)
	}
}

func TestMemoryStoreUseOnceJanitor(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now), WithJanitorInterval(5*time.Millisecond))
	defer m.Close()
	for i := range 100 {
		if err := m.UseOnce(ctx, digestOf(fmt.Sprint(i)), time.Duration(1+i/50)*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(1500 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for m.SingleUses() != 50 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := m.SingleUses(); got != 50 {
		t.Fatalf("janitor left %d markers, want 50", got)
	}
}

func TestMemoryStoreUseOnceConcurrent(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryStore(ctx)
	defer m.Close()
	const digests, workers = 50, 8
	wins := make([]int, digests)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range digests {
				switch err := m.UseOnce(ctx, digestOf(fmt.Sprint(i)), time.Minute); {
				case err == nil:
					mu.Lock()
					wins[i]++
					mu.Unlock()
				case !errors.Is(err, ErrNonceExists):
					t.Errorf("UseOnce: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for i, w := range wins {
		if w != 1 {
			t.Fatalf("digest %d used %d times, want once", i, w)
		}
	}
}

// TestUsedSetHoldsNoPointers: the markers' structures are what the
// garbage collector skips; a pointer in them (a string, a slice) would
// have it scan every marker again at every collection.
func TestUsedSetHoldsNoPointers(t *testing.T) {
	s := newUsedSet(1)
	for _, typ := range []reflect.Type{reflect.TypeOf(s.expiry), reflect.TypeOf(s.rings[0].order).Elem()} {
		if hasPointers(typ) {
			t.Errorf("%v holds pointers", typ)
		}
	}
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Map:
		return hasPointers(t.Key()) || hasPointers(t.Elem())
	case reflect.Array:
		return hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	}
	return true
}

func TestRedisStoreUseOnce(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr())
	other := newTestRedisStore(t, srv.Addr()) // another replica, same prefix
	d := digestOf("proof")
	if err := s.UseOnce(ctx, d, time.Minute); err != nil {
		t.Fatalf("first use: %v", err)
	}
	for _, st := range []*RedisStore{s, other} {
		if err := st.UseOnce(ctx, d, time.Minute); !errors.Is(err, ErrNonceExists) {
			t.Fatalf("replay = %v, want ErrNonceExists", err)
		}
	}
	// One key, the value "1", the ttl set: the name proof nonces had as
	// records, so that replicas of the version before see them.
	name := s.prefix + "kyaos-rp:" + hex.EncodeToString(d[:])
	if got, err := s.client.Get(ctx, name).Result(); err != nil || got != "1" {
		t.Fatalf("GET %s = %q, %v; want \"1\"", name, got, err)
	}
	if ttl, err := s.client.PTTL(ctx, name).Result(); err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("PTTL = %v, %v", ttl, err)
	}
	// A nonce chosen by a client cannot read, take or spend a marker.
	nonce := "kyaos-rp:" + hex.EncodeToString(d[:])
	if _, err := s.Consume(ctx, nonce); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("Consume of a marker's name = %v, want ErrNonceNotFound", err)
	}
	if _, err := s.Peek(ctx, nonce); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("Peek of a marker's name = %v, want ErrNonceNotFound", err)
	}
	if err := s.Put(ctx, "kyaos-rp:other", testRecord(time.Now), time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("Put under the markers' name = %v, want ErrNonceExists", err)
	}
	if err := other.UseOnce(ctx, d, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("marker gone after the client's attempts: %v", err)
	}

	// Concurrent replicas: one use wins.
	var wins sync.Map
	var wg sync.WaitGroup
	for i := range 8 {
		st := []*RedisStore{s, other}[i%2]
		wg.Go(func() {
			for j := range 20 {
				if err := st.UseOnce(ctx, digestOf(fmt.Sprint("c", j)), time.Minute); err == nil {
					if _, dup := wins.LoadOrStore(j, true); dup {
						t.Errorf("digest %d used twice", j)
					}
				} else if !errors.Is(err, ErrNonceExists) {
					t.Errorf("UseOnce: %v", err)
				}
			}
		})
	}
	wg.Wait()

	if err := s.UseOnce(ctx, digestOf("ms"), time.Microsecond); err == nil {
		t.Fatal("ttl under a millisecond accepted")
	}
	srv.Stop()
	if err := s.UseOnce(ctx, digestOf("down"), time.Minute); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Redis down = %v, want ErrStoreUnavailable", err)
	}
}

// TestMemoryStoreUseOnceUnboundPartition: markers made under Unbound fill
// a partition of their own; when it is full, bound markers are still
// made, and a digest marked in either partition is refused in both.
func TestMemoryStoreUseOnceUnboundPartition(t *testing.T) {
	ctx := context.Background()
	anon := Unbound(ctx)
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now), WithMaxEntries(2))
	defer m.Close()
	for _, d := range []string{"a1", "a2"} {
		if err := m.UseOnce(anon, digestOf(d), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.UseOnce(anon, digestOf("a3"), time.Minute); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("unbound when its partition is full = %v, want ErrStoreFull", err)
	}
	if err := m.UseOnce(ctx, digestOf("b1"), time.Minute); err != nil {
		t.Fatalf("bound beside a full unbound partition: %v", err)
	}
	if err := m.UseOnce(ctx, digestOf("a1"), time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("bound reuse of an unbound marker = %v, want ErrNonceExists", err)
	}
	if err := m.UseOnce(anon, digestOf("b1"), time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("unbound reuse of a bound marker = %v, want ErrNonceExists", err)
	}
	if err := m.UseOnce(ctx, digestOf("b2"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := m.UseOnce(ctx, digestOf("b3"), time.Minute); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("bound when its partition is full = %v, want ErrStoreFull", err)
	}
	clock.Advance(time.Minute)
	if err := m.UseOnce(anon, digestOf("a3"), time.Minute); err != nil {
		t.Fatalf("unbound after its markers expired: %v", err)
	}
}

// TestMemoryStoreSetMaxEntries: a changed bound keeps every live marker
// and record, and applies to what comes next.
func TestMemoryStoreSetMaxEntries(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	m := NewMemoryStore(ctx, WithMemoryClock(clock.Now), WithMaxEntries(1))
	defer m.Close()
	if err := m.UseOnce(ctx, digestOf("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := m.UseOnce(ctx, digestOf("y"), time.Minute); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("use when full = %v, want ErrStoreFull", err)
	}
	m.SetMaxEntries(3)
	if err := m.UseOnce(ctx, digestOf("x"), time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("marker after a raised bound = %v, want ErrNonceExists", err)
	}
	for _, d := range []string{"y", "z"} {
		if err := m.UseOnce(ctx, digestOf(d), time.Minute); err != nil {
			t.Fatalf("%s under the raised bound: %v", d, err)
		}
	}
	m.SetMaxEntries(1) // below what is held: nothing dropped, nothing new
	if err := m.UseOnce(ctx, digestOf("w"), time.Minute); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("use over a lowered bound = %v, want ErrStoreFull", err)
	}
	if err := m.UseOnce(ctx, digestOf("z"), time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("marker after a lowered bound = %v, want ErrNonceExists", err)
	}
}
