package challenge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// TestRedisCopiesWhileUnacked: two copies of one proof at the same moment
// while the replica is stalled: the first's write is taken back, so
// neither is admitted and neither is refused as a replay (both 503); once
// the replica is back, the proof is admitted, on this replica and on
// another edge replica that found the unacknowledged marker meanwhile.
func TestRedisCopiesWhileUnacked(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartWith(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port()))
	waitSynced(t, replica)
	opts := RedisOptions{Addr: master.Addr(), KeyPrefix: "test:copies:", WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond}
	s := newWaitStore(t, opts)
	other := newWaitStore(t, opts)
	ctx := context.Background()
	d := digestOf("two copies")

	replica.Pause()
	var wg sync.WaitGroup
	var copies []error
	wg.Go(func() { copies = useConcurrently(s, ctx, [][32]byte{d, d}) })
	key := fmt.Sprintf("%skyaos-rp:%x", opts.KeyPrefix, d[:])
	for deadline := time.Now().Add(2 * time.Second); ; {
		if out, _ := master.CLI("EXISTS", key); out == "1\n" || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Found while the first write waits for the replica: refused as a
	// replay, as documented, but not remembered.
	otherErr := other.UseOnce(ctx, d, time.Minute)
	wg.Wait()
	replica.Resume()
	for i, err := range copies {
		if !errors.Is(err, ErrStoreUnavailable) || errors.Is(err, ErrNonceExists) {
			t.Errorf("copy %d with the replica stalled = %v, want 503 (ErrStoreUnavailable), not a replay", i, err)
		}
	}
	t.Logf("the other edge replica, meanwhile: %v", otherErr)
	waitSynced(t, replica)
	if err := s.UseOnce(ctx, d, time.Minute); err != nil {
		t.Fatalf("the proof tried again on the same edge replica = %v, want admitted", err)
	}
	if err := s.UseOnce(ctx, d, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("replay after it was admitted = %v, want ErrNonceExists", err)
	}
	if err := other.UseOnce(ctx, d, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("replay on the other edge replica = %v, want ErrNonceExists", err)
	}
}

// TestRedisOtherReplicaForgetsTakenBack: an edge replica that finds
// another's marker while it waits for acknowledgement does not remember
// it: once taken back, the proof is admitted there.
func TestRedisOtherReplicaForgetsTakenBack(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartWith(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port()))
	waitSynced(t, replica)
	opts := RedisOptions{Addr: master.Addr(), KeyPrefix: "test:takenback:", WaitReplicas: 1, WaitTimeout: time.Second}
	s := newWaitStore(t, opts)
	other := newWaitStore(t, opts)
	ctx := context.Background()
	d := digestOf("taken back")
	key := fmt.Sprintf("%skyaos-rp:%x", opts.KeyPrefix, d[:])

	replica.Pause()
	first := make(chan error, 1)
	go func() { first <- s.UseOnce(ctx, d, time.Minute) }()
	for deadline := time.Now().Add(2 * time.Second); ; {
		if out, _ := master.CLI("EXISTS", key); out == "1\n" {
			break
		}
		if time.Now().After(deadline) {
			replica.Resume()
			t.Fatal("the first write never reached the master")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := other.UseOnce(ctx, d, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Errorf("found while unacknowledged = %v, want ErrNonceExists (documented)", err)
	}
	err := <-first
	replica.Resume()
	if !errors.Is(err, ErrReplicasNotAcked) {
		t.Fatalf("first write with the replica stalled = %v, want ErrReplicasNotAcked", err)
	}
	waitSynced(t, replica)
	if err := other.UseOnce(ctx, d, time.Minute); err != nil {
		t.Fatalf("the taken-back proof tried on the edge replica that found it = %v, want admitted", err)
	}
}

// TestRedisQueuedBounded: while Redis stalls, a request is refused (503)
// in about the store's timeout however many are queued before it, and one
// whose request ended is refused as such (not sending it is shown by
// TestRedisCopyOfRequestThatLeft).
func TestRedisQueuedBounded(t *testing.T) {
	srv := redistest.Start(t)
	const timeout = 200 * time.Millisecond
	s := newWaitStore(t, RedisOptions{Addr: srv.Addr(), WaitReplicas: RedisWaitOff, ReadTimeout: timeout, WriteTimeout: timeout})
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	// Requests that leave at once, queued behind the writers' first
	// batches.
	left := make([][32]byte, 64)
	lctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for i := range left {
		left[i] = digestOf(fmt.Sprint("left-", i))
		wg.Go(func() {
			if err := s.UseOnce(lctx, left[i], time.Minute); !errors.Is(err, ErrRequestEnded) {
				t.Errorf("UseOnce of a request that left = %v, want ErrRequestEnded", err)
			}
		})
	}
	wg.Wait()
	// Patient requests, many batches' worth.
	var digests [][32]byte
	for i := range 4000 {
		digests = append(digests, digestOf(fmt.Sprint("patient-", i)))
	}
	start := time.Now()
	errs := useConcurrently(s, ctx, digests)
	took := time.Since(start)
	srv.Resume()
	resumed = true
	for i, err := range errs {
		if !errors.Is(err, ErrStoreUnavailable) {
			t.Fatalf("UseOnce %d with Redis stalled = %v, want ErrStoreUnavailable", i, err)
		}
	}
	if took > 8*timeout {
		t.Errorf("%d requests with Redis stalled were refused after %v, want about the store's timeout (%v)", len(digests), took, timeout)
	}
	t.Logf("%d refused within %v", len(digests), took)
}

// TestRedisRequestEndedNotAnOutage: a request that leaves while its marker
// is queued is refused but is no store failure: not logged, so that a real
// outage right after is.
func TestRedisRequestEndedNotAnOutage(t *testing.T) {
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr())
	core, logs := observer.New(zapcore.InfoLevel)
	w := Watch(s, new(Alarm), zap.New(core), "redis")
	ctx := context.Background()
	if err := w.UseOnce(ctx, digestOf("warm"), time.Minute); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	err := w.UseOnce(lctx, digestOf("leaves"), time.Minute)
	cancel()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err2 := w.UseOnce(cctx, digestOf("left before"), time.Minute)
	srv.Resume()
	if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err2, ErrStoreUnavailable) {
		t.Fatalf("UseOnce of requests that left = %v, %v, want ErrStoreUnavailable (refused)", err, err2)
	}
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 0 {
		t.Fatalf("a request that left logged %d ERROR lines: %v", n, logs.All()[0].Message)
	}
	srv.Stop()
	if err := w.UseOnce(ctx, digestOf("outage"), time.Minute); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("UseOnce with Redis down = %v", err)
	}
	if n := logs.FilterMessageSnippet("nonce store unavailable").Len(); n != 1 {
		t.Fatalf("a real outage after a request that left logged %d lines, want 1", n)
	}
}

// TestRedisCopyOfRequestThatLeft: of two copies of one proof queued at
// once, the first's request leaves before its batch is sent: the copy is
// sent in its place and admitted, not refused for the request that left.
func TestRedisCopyOfRequestThatLeft(t *testing.T) {
	srv := redistest.Start(t)
	s := newWaitStore(t, RedisOptions{Addr: srv.Addr(), WaitReplicas: RedisWaitOff, ReadTimeout: time.Second})
	ctx := context.Background()
	if err := s.UseOnce(ctx, digestOf("warm"), time.Minute); err != nil {
		t.Fatal(err)
	}
	b := s.batch
	until := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				srv.Resume()
				t.Fatalf("timed out waiting until %s", what)
			}
		}
	}
	locked := func(f func() bool) func() bool {
		return func() bool { b.mu.Lock(); defer b.mu.Unlock(); return f() }
	}
	until("both writers idle", locked(func() bool { return b.idle == markerWriters }))
	srv.Pause()
	// Each writer takes a batch Redis does not answer while paused.
	var wg sync.WaitGroup
	for i := range markerWriters {
		blocker := digestOf(fmt.Sprint("blocker-", i))
		wg.Go(func() { _ = s.UseOnce(ctx, blocker, time.Minute) })
		until("the blocker is sent", locked(func() bool { return b.inflight[blocker] != nil && len(b.queue) == 0 }))
	}
	d := digestOf("copy of a request that left")
	lctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	first := make(chan error, 1)
	go func() { first <- s.UseOnce(lctx, d, time.Minute) }()
	until("the first is queued", locked(func() bool { return b.inflight[d] != nil }))
	copied := make(chan error, 1)
	go func() { copied <- s.UseOnce(ctx, d, time.Minute) }()
	until("the copy waits on it", locked(func() bool { return b.copies == 1 }))
	if err := <-first; !errors.Is(err, ErrRequestEnded) {
		srv.Resume()
		t.Fatalf("the request that left = %v, want ErrRequestEnded", err)
	}
	srv.Resume()
	wg.Wait()
	if err := <-copied; err != nil {
		t.Fatalf("the copy, once the first's request left = %v, want admitted", err)
	}
	if err := s.UseOnce(ctx, d, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("replay = %v, want ErrNonceExists", err)
	}
}
