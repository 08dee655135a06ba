package challenge

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

func newWaitStore(t testing.TB, opts RedisOptions) *RedisStore {
	t.Helper()
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = "test:" + t.Name() + ":"
	}
	s, err := NewRedisStore(opts)
	if err != nil {
		t.Fatalf("NewRedisStore: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRedisWaitReplicas: with a replica, a single-use write is relied on
// only once the replica has it; a stalled replica turns it into a refusal
// (ErrStoreUnavailable, ErrReplicasNotAcked) that leaves nothing behind, so
// that the same proof is accepted once the replica is back.
func TestRedisWaitReplicas(t *testing.T) {
	ctx := context.Background()
	master := redistest.Start(t)
	replica := redistest.StartWith(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port()))
	waitSynced(t, replica)
	// A second: a live replica on a loaded machine (the full suite runs
	// beside this test) may take well over 100ms to acknowledge.
	s := newWaitStore(t, RedisOptions{Addr: master.Addr(), WaitTimeout: time.Second})
	key := func(d [32]byte) string { return fmt.Sprintf("%skyaos-rp:%x", s.prefix, d[:]) }

	d := digestOf("acknowledged")
	if err := s.UseOnce(ctx, d, time.Minute); err != nil {
		t.Fatalf("UseOnce with a live replica: %v", err)
	}
	// Acknowledged means the replica holds it at the time UseOnce returns.
	if out, _ := replica.CLI("EXISTS", key(d)); out != "1\n" {
		t.Fatalf("replica does not hold the marker after UseOnce returned: %q", out)
	}
	if err := s.UseOnce(ctx, d, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("replay = %v, want ErrNonceExists", err)
	}

	replica.Pause()
	stalled := digestOf("stalled")
	start := time.Now()
	err := s.UseOnce(ctx, stalled, time.Minute)
	if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, ErrReplicasNotAcked) {
		replica.Resume()
		t.Fatalf("UseOnce with a stalled replica = %v, want ErrStoreUnavailable and ErrReplicasNotAcked", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the refusal took %v; the wait timeout is 1s", took)
	}
	rec := Record{Challenge: "c", AgentDID: testDID}
	if err := s.Put(ctx, "stalled-challenge", rec, time.Minute); !errors.Is(err, ErrReplicasNotAcked) {
		t.Errorf("Put with a stalled replica = %v, want ErrReplicasNotAcked", err)
	}
	if h := s.Health(); h.WaitTimeouts < 2 || h.Up {
		t.Errorf("health = %+v, want 2 wait timeouts and down", h)
	}
	replica.Resume()
	waitSynced(t, replica)
	// The refused write was taken back: the proof was not admitted, so it
	// may be used now.
	if err := s.UseOnce(ctx, stalled, time.Minute); err != nil {
		t.Fatalf("UseOnce after the replica came back: %v", err)
	}
	if err := s.Put(ctx, "stalled-challenge", rec, time.Minute); err != nil {
		t.Fatalf("Put after the replica came back: %v", err)
	}
	if _, err := s.Consume(ctx, "stalled-challenge"); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if h := s.Health(); !h.Up {
		t.Errorf("health = %+v, want up", h)
	}
}

// TestRedisWaitModes: auto waits only where the master has replicas; a
// number is strict; off never waits.
func TestRedisWaitModes(t *testing.T) {
	ctx := context.Background()
	alone := redistest.Start(t)
	for _, tc := range []struct {
		name string
		wait int
		ok   bool
	}{
		{"auto without replicas writes", RedisWaitAuto, true},
		{"off writes", RedisWaitOff, true},
		{"one replica required but none", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newWaitStore(t, RedisOptions{Addr: alone.Addr(), WaitReplicas: tc.wait, WaitTimeout: 50 * time.Millisecond})
			err := s.UseOnce(ctx, digestOf(tc.name), time.Minute)
			if (err == nil) != tc.ok {
				t.Fatalf("UseOnce = %v, want ok %v", err, tc.ok)
			}
			if !tc.ok && !errors.Is(err, ErrReplicasNotAcked) {
				t.Fatalf("UseOnce = %v, want ErrReplicasNotAcked", err)
			}
		})
	}
	for _, bad := range []RedisOptions{
		{Addr: alone.Addr(), WaitReplicas: -2},
		{Addr: alone.Addr(), WaitTimeout: -time.Second},
		{Addrs: []string{alone.Addr()}},
		{Addrs: []string{alone.Addr()}, MasterName: "m", Cluster: true},
		{Addr: alone.Addr(), MasterName: "m"},
		{Addrs: []string{alone.Addr()}, Cluster: true, DB: 1},
		{MasterName: "m"},
	} {
		if s, err := NewRedisStore(bad); err == nil {
			s.Close()
			t.Errorf("NewRedisStore(%+v) succeeded", bad)
		}
	}
}

func waitSynced(t testing.TB, replica *redistest.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := replica.CLI("INFO", "replication")
		if strings.Contains(out, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica did not sync: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkRedisUseOnceWait: what waiting for replicas costs a proof
// nonce, against the same write without waiting, on loopback (a master and
// two replicas on this machine), from 32 concurrent writers as an edge's
// requests make them. Besides time, what the master counted per nonce:
// commands, reads (round trips: a pipeline is one), bytes from the edge
// and bytes to the replicas.
func BenchmarkRedisUseOnceWait(b *testing.B) {
	master := redistest.Start(b)
	for range 2 {
		waitSynced(b, redistest.StartWith(b, "--replicaof", "127.0.0.1", fmt.Sprint(master.Port())))
	}
	for _, mode := range []struct {
		name string
		wait int
	}{{"off", RedisWaitOff}, {"wait1", 1}, {"wait2", 2}} {
		b.Run(mode.name, func(b *testing.B) {
			s := newWaitStore(b, RedisOptions{Addr: master.Addr(), WaitReplicas: mode.wait})
			ctx := context.Background()
			fields := []string{"total_commands_processed", "total_reads_processed", "total_net_input_bytes", "total_net_repl_output_bytes"}
			units := []string{"redis-cmds/op", "redis-reads/op", "redis-in-B/op", "redis-repl-B/op"}
			before := make([]int, len(fields))
			for i, f := range fields {
				before[i] = infoStat(b, master, f)
			}
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				var d [32]byte
				for pb.Next() {
					if _, err := rand.Read(d[:]); err != nil {
						b.Fatal(err)
					}
					if err := s.UseOnce(ctx, d, time.Minute); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.StopTimer()
			for i, f := range fields {
				b.ReportMetric(float64(infoStat(b, master, f)-before[i])/float64(b.N), units[i])
			}
		})
	}
}
