package challenge

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// TestRecentMarkers: a digest is held for its ttl, and a full filter
// forgets its oldest digest first.
func TestRecentMarkers(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	r := newRecentMarkers(3)
	for i := range 3 {
		r.add(digestOf(fmt.Sprint(i)), now, time.Minute)
	}
	for i := range 3 {
		if !r.seen(digestOf(fmt.Sprint(i)), now) {
			t.Fatalf("digest %d not seen", i)
		}
	}
	if r.seen(digestOf("0"), now.Add(time.Minute)) {
		t.Fatal("digest seen after its ttl")
	}
	r.add(digestOf("3"), now, time.Minute)
	if r.seen(digestOf("0"), now) || !r.seen(digestOf("1"), now) || !r.seen(digestOf("3"), now) {
		t.Fatal("a full filter did not forget its oldest digest (and only it)")
	}
	// A digest added again keeps its new expiry when its old slot goes.
	r.add(digestOf("1"), now, time.Hour)
	r.add(digestOf("4"), now, time.Minute)
	if !r.seen(digestOf("1"), now.Add(30*time.Minute)) {
		t.Fatal("a digest added again was forgotten with its old slot")
	}
	if len(r.expiry) > 3 || len(r.ring) > 3 {
		t.Fatalf("filter holds %d digests in %d slots, bound 3", len(r.expiry), len(r.ring))
	}
}

// TestRedisReplayRefusedLocally: a replay of a marker this store wrote,
// or found written, is refused without asking Redis; a write that failed
// leaves nothing behind that would refuse the proof later.
func TestRedisReplayRefusedLocally(t *testing.T) {
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr())
	ctx := context.Background()
	d := digestOf("local replay")
	if err := s.UseOnce(ctx, d, time.Minute); err != nil {
		t.Fatal(err)
	}
	before := infoStat(t, srv, "total_commands_processed")
	for range 5 {
		if err := s.UseOnce(ctx, d, time.Minute); !errors.Is(err, ErrNonceExists) {
			t.Fatalf("replay = %v, want ErrNonceExists", err)
		}
	}
	// The INFO itself is one command.
	if n := infoStat(t, srv, "total_commands_processed") - before; n != 1 {
		t.Fatalf("5 replays cost Redis %d commands, want none", n-1)
	}

	// Written by another replica: found in Redis once, then refused here.
	other := newTestRedisStore(t, srv.Addr())
	o := digestOf("other replica")
	if err := other.UseOnce(ctx, o, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.UseOnce(ctx, o, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("replay of another replica's proof = %v", err)
	}
	before = infoStat(t, srv, "total_commands_processed")
	if err := s.UseOnce(ctx, o, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("second replay = %v", err)
	}
	if n := infoStat(t, srv, "total_commands_processed") - before; n != 1 {
		t.Fatalf("a known replay cost Redis %d commands, want none", n-1)
	}

	// A write that failed is not remembered.
	f := digestOf("failed")
	srv.Stop()
	if err := s.UseOnce(ctx, f, time.Minute); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("UseOnce with Redis down = %v", err)
	}
	srv.Restart()
	if err := s.UseOnce(ctx, f, time.Minute); err != nil {
		t.Fatalf("UseOnce after a failed write = %v, want admitted", err)
	}
}

// TestRedisSeenLocally: Seen answers, without a round trip, for a marker
// this store wrote, and not for one it has not met.
func TestRedisSeenLocally(t *testing.T) {
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr())
	var _ SeenLocally = s
	d := digestOf("seen locally")
	if s.Seen(d) {
		t.Fatal("a marker never written is Seen")
	}
	if err := s.UseOnce(context.Background(), d, time.Minute); err != nil {
		t.Fatal(err)
	}
	before := infoStat(t, srv, "total_commands_processed")
	if !s.Seen(d) || s.Seen(digestOf("another")) {
		t.Fatal("Seen does not tell the written marker from another")
	}
	if after := infoStat(t, srv, "total_commands_processed"); after != before+1 {
		t.Fatalf("Seen asked Redis: %d commands, want only the INFO itself", after-before)
	}
}
