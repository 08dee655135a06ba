package challenge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// watchedStore is a guarded store on srv (EvictionCheckInterval an hour:
// the test reads the policy itself, as the periodic check would), watched
// by a fresh alarm that logs to the returned observer.
func watchedStore(t *testing.T, srv *redistest.Server) (*RedisStore, Watched, *observer.ObservedLogs) {
	t.Helper()
	s := guardedStore(t, RedisOptions{Addr: srv.Addr(), WaitReplicas: RedisWaitOff,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond}, time.Hour)
	core, logs := observer.New(zap.InfoLevel)
	return s, Watch(s, new(Alarm), zap.New(core), "redis"), logs
}

// errorLine is the only ERROR line logged, with its error, or fails.
func errorLine(t *testing.T, logs *observer.ObservedLogs, what string) string {
	t.Helper()
	lines := logs.TakeAll()
	var errs []string
	for _, l := range lines {
		if l.Level == zap.ErrorLevel {
			e, _ := l.ContextMap()["error"].(string)
			errs = append(errs, l.Message+" "+e)
		}
	}
	if len(errs) != 1 {
		t.Fatalf("%s: %d ERROR lines, want 1: %q", what, len(errs), errs)
	}
	return errs[0]
}

// TestWatchedEvictionAlarm: when the policy changes under a running
// store, its single-use writes fail closed, and the log says why and what
// to set, once however many are refused.
func TestWatchedEvictionAlarm(t *testing.T) {
	srv := redistest.Start(t)
	_, w, logs := watchedStore(t, srv)
	ctx := context.Background()
	if err := w.UseOnce(ctx, [32]byte{1}, time.Minute); err != nil {
		t.Fatalf("UseOnce on a noeviction server: %v", err)
	}
	if _, err := srv.CLI("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
		t.Fatal(err)
	}
	// A new connection reads the policy before carrying a write.
	if _, err := srv.CLI("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
		t.Fatal(err)
	}
	_ = w.UseOnce(ctx, [32]byte{2}, time.Minute) // may meet its killed connection
	for i := range 10 {
		err := w.UseOnce(ctx, [32]byte{3, byte(i)}, time.Minute)
		if !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, ErrEvictionRisk) {
			t.Fatalf("UseOnce %d on an allkeys-lru server = %v, want refused", i, err)
		}
	}
	msg := errorLine(t, logs, "11 refused writes")
	for _, want := range []string{"allkeys-lru", "maxmemory-policy noeviction", "accept_eviction", "+info"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the ERROR line does not say %q: %s", want, msg)
		}
	}
}

// TestWatchedOutageAfterPolicyChange: a server that was refused for its
// eviction policy and then stops answering is unreachable, and the log and
// the writes' errors say so, not the policy it had when it last answered
// (which may have been fixed since); when it is back with noeviction,
// writes go through again.
func TestWatchedOutageAfterPolicyChange(t *testing.T) {
	srv := redistest.Start(t)
	s, w, logs := watchedStore(t, srv)
	ctx := context.Background()
	if _, err := srv.CLI("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EvictionPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.UseOnce(ctx, [32]byte{1}, time.Minute); !errors.Is(err, ErrEvictionRisk) {
		t.Fatalf("UseOnce on an allkeys-lru server = %v, want refused for the policy", err)
	}
	errorLine(t, logs, "the refused write")

	srv.Stop()
	if _, err := s.EvictionPolicy(ctx); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("EvictionPolicy with the server down = %v, want ErrStoreUnavailable", err)
	}
	for i := range 5 {
		err := w.UseOnce(ctx, [32]byte{2, byte(i)}, time.Minute)
		if !errors.Is(err, ErrStoreUnavailable) || errors.Is(err, ErrEvictionRisk) || strings.Contains(err.Error(), "allkeys-lru") {
			t.Fatalf("UseOnce %d with the server down = %v, want ErrStoreUnavailable for the outage, not the old policy", i, err)
		}
	}
	msg := errorLine(t, logs, "the writes during the outage")
	if !strings.Contains(msg, "nonce store unavailable") || strings.Contains(msg, "allkeys-lru") {
		t.Errorf("the ERROR line during the outage = %q, want it to say the store is unavailable, not name the old policy", msg)
	}

	srv.Restart() // a fresh server: noeviction
	if !within(5*time.Second, func() bool { return w.UseOnce(ctx, [32]byte{3, byte(time.Now().UnixNano())}, time.Minute) == nil }) {
		t.Fatalf("single-use writes still refused after the server came back with noeviction: %v", w.UseOnce(ctx, [32]byte{4}, time.Minute))
	}
}

// TestWatchedFullAlarm: a Redis out of memory under noeviction refuses
// writes as full, and the one ERROR line says so, and what to raise,
// rather than "unavailable".
func TestWatchedFullAlarm(t *testing.T) {
	srv := redistest.Start(t)
	_, w, logs := watchedStore(t, srv)
	if _, err := srv.CLI("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		err := w.UseOnce(context.Background(), [32]byte{3, byte(i)}, time.Minute)
		if !errors.Is(err, ErrStoreFull) {
			t.Fatalf("UseOnce %d on a Redis out of memory = %v, want ErrStoreFull", i, err)
		}
	}
	msg := errorLine(t, logs, "10 refused writes")
	for _, want := range []string{"out of memory", "raise maxmemory", "nonce_store_full"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the ERROR line does not say %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "unavailable") {
		t.Errorf("the ERROR line calls a full store unavailable: %s", msg)
	}
}
