package challenge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// useConcurrently calls UseOnce for every digest at once, from a goroutine
// each, and returns their errors in order.
func useConcurrently(s *RedisStore, ctx context.Context, digests [][32]byte) []error {
	errs := make([]error, len(digests))
	var start, wg sync.WaitGroup
	start.Add(1)
	for i, d := range digests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			errs[i] = s.UseOnce(ctx, d, time.Minute)
		}()
	}
	start.Done()
	wg.Wait()
	return errs
}

// infoStat is the number field of the server's INFO stats (reads: one per
// batch that arrives in one piece, one per command sent alone).
func infoStat(t testing.TB, srv *redistest.Server, field string) int {
	t.Helper()
	out, err := srv.CLI("INFO", "stats")
	if err != nil {
		t.Fatalf("INFO stats: %v", err)
	}
	v, ok := infoField(out, field)
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if !ok || err != nil {
		t.Fatalf("redis-server reports no %s (%q): these tests need Redis 7 (Debian 12's redis-server, which scripts/test.sh installs)", field, v)
	}
	return n
}

// TestRedisMarkerBatch: markers used at once share round trips, and each
// digest is still admitted once: of four requests with one digest, one
// succeeds and three are replays, with or without waiting for a replica.
func TestRedisMarkerBatch(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartWith(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port()))
	waitSynced(t, replica)
	for _, mode := range []struct {
		name string
		wait int
	}{{"off", RedisWaitOff}, {"wait1", 1}} {
		t.Run(mode.name, func(t *testing.T) {
			s := newWaitStore(t, RedisOptions{Addr: master.Addr(), WaitReplicas: mode.wait})
			ctx := context.Background()
			if err := s.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			var digests [][32]byte
			for i := range 256 {
				digests = append(digests, digestOf(fmt.Sprintf("%s-%d", mode.name, i/4)))
			}
			before := infoStat(t, master, "total_reads_processed")
			errs := useConcurrently(s, ctx, digests)
			reads := infoStat(t, master, "total_reads_processed") - before
			admitted := map[[32]byte]int{}
			for i, err := range errs {
				switch {
				case err == nil:
					admitted[digests[i]]++
				case !errors.Is(err, ErrNonceExists):
					t.Fatalf("UseOnce %d = %v, want nil or ErrNonceExists", i, err)
				}
			}
			if len(admitted) != 64 {
				t.Fatalf("%d of 64 digests admitted", len(admitted))
			}
			for d, n := range admitted {
				if n != 1 {
					t.Fatalf("digest %x admitted %d times", d[:4], n)
				}
			}
			// One read per marker is what a command per request costs; the
			// INFO itself is one more.
			if reads >= len(digests) {
				t.Errorf("Redis read %d times for %d markers sent at once: not batched", reads, len(digests))
			}
			t.Logf("%d markers in %d reads", len(digests), reads)
		})
	}
}

// TestRedisMarkerBatchNotAcked: a batch the replica does not acknowledge
// is refused as a whole (503, never a replay) and taken back, so that each
// of its proofs is admitted once the replica is back.
func TestRedisMarkerBatchNotAcked(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartWith(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port()))
	waitSynced(t, replica)
	s := newWaitStore(t, RedisOptions{Addr: master.Addr(), WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	ctx := context.Background()
	var digests [][32]byte
	for i := range 32 {
		digests = append(digests, digestOf(fmt.Sprint("stalled-batch-", i)))
	}
	replica.Pause()
	errs := useConcurrently(s, ctx, digests)
	replica.Resume()
	for i, err := range errs {
		if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, ErrReplicasNotAcked) {
			t.Fatalf("UseOnce %d with a stalled replica = %v, want ErrStoreUnavailable and ErrReplicasNotAcked", i, err)
		}
	}
	waitSynced(t, replica)
	for i, err := range useConcurrently(s, ctx, digests) {
		if err != nil {
			t.Fatalf("UseOnce %d after the replica came back = %v", i, err)
		}
	}
}

// TestRedisMarkerBatchDown: with Redis gone, every marker of a batch is
// refused as unavailable (503), none as a replay; after Close, so is every
// later one; a request that stops waiting is refused too.
func TestRedisMarkerBatchDown(t *testing.T) {
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr())
	ctx := context.Background()
	var digests [][32]byte
	for i := range 16 {
		digests = append(digests, digestOf(fmt.Sprint("down-", i)))
	}
	srv.Stop()
	for i, err := range useConcurrently(s, ctx, digests) {
		if !errors.Is(err, ErrStoreUnavailable) || errors.Is(err, ErrNonceExists) {
			t.Fatalf("UseOnce %d with Redis down = %v, want ErrStoreUnavailable only", i, err)
		}
	}
	srv.Restart()
	for i, err := range useConcurrently(s, ctx, digests) {
		if err != nil {
			t.Fatalf("UseOnce %d after Redis came back = %v", i, err)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.UseOnce(cctx, digestOf("cancelled"), time.Minute); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("UseOnce with a cancelled context = %v, want ErrStoreUnavailable", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.UseOnce(ctx, digestOf("after close"), time.Minute); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("UseOnce after Close = %v, want ErrStoreUnavailable", err)
	}
}

// TestRedisMarkerBatchPartFailed: in a batch where Redis refuses one
// marker (here an ACL that allows only keys whose digest starts with 0),
// the others are still relied on only once the replica has them: with the
// replica stalled, they are refused (503) and taken back, not admitted.
func TestRedisMarkerBatchPartFailed(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartWith(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port()))
	waitSynced(t, replica)
	prefix := "test:partfailed:"
	if out, err := master.CLI("ACL", "SETUSER", "edge", "on", ">edge-pw", "~"+prefix+"kyaos-rp:0*", "+@all"); err != nil {
		t.Fatalf("ACL SETUSER: %v %s", err, out)
	}
	s := newWaitStore(t, RedisOptions{Addr: master.Addr(), Username: "edge", Password: "edge-pw", KeyPrefix: prefix,
		WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond, AcceptEviction: true})
	var allowed, denied [32]byte
	for i := 0; allowed == [32]byte{} || denied == [32]byte{}; i++ {
		d := digestOf(fmt.Sprint("part-", i))
		if d[0]>>4 == 0 {
			allowed = d
		} else {
			denied = d
		}
	}
	batch := []*pendingMarker{
		{digest: allowed, px: int64(60000), done: make(chan struct{}, 1)},
		{digest: denied, px: int64(60000), done: make(chan struct{}, 1)},
	}
	w := &markerWriter{b: s.batch, pipe: s.client.Pipeline()}
	replica.Pause()
	w.flush(batch)
	replica.Resume()
	if err := batch[1].err; !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("the marker the ACL refuses = %v, want ErrStoreUnavailable", err)
	}
	if err := batch[0].err; !errors.Is(err, ErrReplicasNotAcked) {
		t.Fatalf("the marker beside it, with the replica stalled = %v, want ErrReplicasNotAcked", err)
	}
	waitSynced(t, replica)
	if err := s.UseOnce(context.Background(), allowed, time.Minute); err != nil {
		t.Fatalf("the marker taken back, used again = %v", err)
	}
}
