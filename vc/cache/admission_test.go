package cache

import (
	"context"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestResultCacheAdmission: while the cache has room every verified
// credential is stored; once it is full, a credential is stored the second
// time it is verified, so that one-off credentials displace nothing.
func TestResultCacheAdmission(t *testing.T) {
	const capacity = 8 // one shard
	f := newFixture(t)
	m := f.minter(t)
	clock := &testClock{t: fixedNow}
	v, res, hc := f.cached(clock, capacity, nil)
	ctx := context.Background()
	aud := vc.ForAudience(serverDID)
	verify := func(raw []byte) {
		t.Helper()
		if _, err := v.Verify(ctx, raw, aud); err != nil {
			t.Fatal(err)
		}
	}

	for i := range capacity {
		verify(m.mint(i))
	}
	for i := range capacity {
		verify(m.mint(i))
	}
	expectCalls(t, res, capacity, "room for all: each stored the first time")
	if n := v.Len(); n != capacity {
		t.Fatalf("Len = %d, want %d", n, capacity)
	}

	const oneOffs = 300
	for i := range oneOffs {
		verify(m.mint(capacity + i))
	}
	expectCalls(t, res, capacity+oneOffs, "one-offs")
	hitsBefore := hc.hits.Load()
	for i := range capacity {
		verify(m.mint(i))
	}
	expectCalls(t, res, capacity+oneOffs, "after the one-offs, the first ones")
	if got := hc.hits.Load() - hitsBefore; got != capacity {
		t.Fatalf("%d of the first %d credentials hit after the one-offs", got, capacity)
	}

	// The last one-off, verified again, is stored (in place of one of the
	// first ones) and hits from then on.
	last := m.mint(capacity + oneOffs - 1)
	verify(last)
	expectCalls(t, res, capacity+oneOffs+1, "a one-off verified a second time")
	verify(last)
	expectCalls(t, res, capacity+oneOffs+1, "the same, a third time: stored the second")
	if n := v.Len(); n != capacity {
		t.Fatalf("Len = %d, want %d", n, capacity)
	}

	// Entries past the cache TTL (60 s) fill the shard but are served no
	// more. One verified again replaces its own entry at once: that evicts
	// nothing.
	clock.add(2 * time.Minute)
	before := res.calls.Load()
	verify(last)
	verify(last)
	expectCalls(t, res, before+1, "an expired entry's credential: stored again the first time")
}

func TestDoorkeeper(t *testing.T) {
	for _, tc := range []struct{ maxEntries, slots int }{
		{0, minDoorkeeperSlots},
		{1, minDoorkeeperSlots},
		{10_000, 1 << 16},
		{16_384, 1 << 16},
		{16_385, 1 << 17},
		{1 << 30, maxDoorkeeperSlots},
	} {
		if got := len(newDoorkeeper(tc.maxEntries).slots); got != tc.slots {
			t.Errorf("%d entries: %d slots, want %d", tc.maxEntries, got, tc.slots)
		}
	}

	d := newDoorkeeper(100)
	var a, b, zero resultKey
	a[8], a[16] = 7, 1
	b[8], b[16] = 7, 2 // a's slot, another fingerprint
	zero[9] = 1        // a fingerprint of zero bytes, in an empty slot
	steps := []struct {
		k    *resultKey
		want bool
		why  string
	}{
		{&zero, false, "an empty slot is no sighting, whatever the key's bytes"},
		{&zero, true, "seen"},
		{&a, false, "first"},
		{&a, true, "second"},
		{&b, false, "b takes a's slot"},
		{&a, false, "a forgotten"},
		{&a, true, "a again"},
	}
	for i, s := range steps {
		if got := d.seenBefore(s.k); got != s.want {
			t.Fatalf("step %d (%s): seenBefore = %v", i, s.why, got)
		}
	}
}
