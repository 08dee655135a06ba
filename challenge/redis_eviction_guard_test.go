package challenge

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// guardedStore is a store on srv that accepts no eviction, reading the
// policy again every interval.
func guardedStore(t *testing.T, opts RedisOptions, interval time.Duration) *RedisStore {
	t.Helper()
	opts.KeyPrefix = "guard:" + t.Name() + ":"
	opts.EvictionCheckInterval = interval
	s, err := NewRedisStore(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// writes tries both single-use writes with fresh names, and returns the
// errors: a request proof's marker and a challenge record.
func writes(t *testing.T, s *RedisStore) (useOnce, put error) {
	t.Helper()
	ctx := context.Background()
	name := t.Name() + time.Now().String()
	return s.UseOnce(ctx, sha256.Sum256([]byte(name)), time.Minute), s.Put(ctx, name, testRecord(time.Now), time.Minute)
}

func wantRefused(t *testing.T, what string, s *RedisStore, says ...string) {
	t.Helper()
	u, p := writes(t, s)
	for _, err := range []error{u, p} {
		if !errors.Is(err, ErrEvictionRisk) || !errors.Is(err, ErrStoreUnavailable) {
			t.Fatalf("%s: write = %v, want refused with ErrEvictionRisk and ErrStoreUnavailable", what, err)
		}
		for _, w := range says {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", what, err, w)
			}
		}
	}
}

func wantAllowed(t *testing.T, what string, s *RedisStore) {
	t.Helper()
	if u, p := writes(t, s); u != nil || p != nil {
		t.Fatalf("%s: UseOnce = %v, Put = %v; want both to succeed", what, u, p)
	}
}

// within polls cond every 50ms for up to d.
func within(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestRedisEvictionGuardNoInfo: an ACL user without INFO and CONFIG gets
// an error reply, which is an answer (the server is up): the policy is
// unknown, and single-use writes are refused, saying to grant INFO,
// though SET and GET would work. Accepting eviction lets them through.
func TestRedisEvictionGuardNoInfo(t *testing.T) {
	srv := redistest.StartWith(t, "--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru")
	if out, err := srv.CLI("ACL", "SETUSER", "edge", "on", ">edgepw", "~*", "+@all", "-info", "-config"); err != nil {
		t.Fatalf("ACL SETUSER: %v %s", err, out)
	}
	opts := RedisOptions{Addr: srv.Addr(), Username: "edge", Password: "edgepw"}
	s := guardedStore(t, opts, time.Hour)
	if _, err := s.EvictionPolicy(context.Background()); !errors.Is(err, ErrPolicyUnknown) || errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("EvictionPolicy for a user without INFO = %v, want ErrPolicyUnknown (the server answered)", err)
	}
	wantRefused(t, "user without INFO", s, "+info", "NOPERM")

	// Never checked explicitly: the first write reads the policy.
	wantRefused(t, "user without INFO, first write", guardedStore(t, opts, time.Hour), "+info")

	// Without INFO, the store cannot count replicas either: it writes
	// without waiting for them.
	opts.AcceptEviction, opts.WaitReplicas = true, RedisWaitOff
	wantAllowed(t, "accepting eviction", guardedStore(t, opts, time.Hour))
}

// TestRedisEvictionGuardPolicyChanged: a policy changed at run time
// (CONFIG SET) is seen by the periodic check, both ways.
func TestRedisEvictionGuardPolicyChanged(t *testing.T) {
	srv := redistest.Start(t)
	s := guardedStore(t, RedisOptions{Addr: srv.Addr()}, 100*time.Millisecond)
	wantAllowed(t, "noeviction", s)
	if _, err := srv.CLI("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
		t.Fatal(err)
	}
	if !within(5*time.Second, func() bool { _, err := writes(t, s); return errors.Is(err, ErrEvictionRisk) }) {
		t.Fatal("writes still allowed 5s after the policy became allkeys-lru")
	}
	wantRefused(t, "after CONFIG SET allkeys-lru", s, "allkeys-lru", "noeviction")
	if _, err := srv.CLI("CONFIG", "SET", "maxmemory-policy", "noeviction"); err != nil {
		t.Fatal(err)
	}
	if !within(5*time.Second, func() bool { u, p := writes(t, s); return u == nil && p == nil }) {
		u, p := writes(t, s)
		t.Fatalf("writes still refused 5s after the policy became noeviction again: %v, %v", u, p)
	}
}

// TestRedisEvictionGuardReconnect: a new connection reads the policy
// before it carries a write, so a server reached again (here: after its
// clients were killed) with another policy refuses the very next write,
// long before the periodic check.
func TestRedisEvictionGuardReconnect(t *testing.T) {
	srv := redistest.Start(t)
	s := guardedStore(t, RedisOptions{Addr: srv.Addr()}, time.Hour)
	wantAllowed(t, "noeviction", s)
	if _, err := srv.CLI("CONFIG", "SET", "maxmemory-policy", "volatile-ttl"); err != nil {
		t.Fatal(err)
	}
	if out, err := srv.CLI("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
		t.Fatalf("CLIENT KILL: %v %s", err, out)
	}
	// The first command may meet its killed connection and fail; the one
	// after it is on a new connection.
	_, _ = writes(t, s)
	wantRefused(t, "after reconnecting to a volatile-ttl server", s, "volatile-ttl")
}

// TestRedisEvictionGuardDownAtStart: a server that could not be reached
// when the store was made is checked when it answers: writes fail closed
// meanwhile, and are refused if it comes back evicting.
func TestRedisEvictionGuardDownAtStart(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", NoEviction} {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.StartWith(t, "--maxmemory", "10mb", "--maxmemory-policy", policy)
			srv.Stop()
			s := guardedStore(t, RedisOptions{Addr: srv.Addr(), DialTimeout: 200 * time.Millisecond}, time.Hour)
			if _, err := s.EvictionPolicy(context.Background()); !errors.Is(err, ErrStoreUnavailable) {
				t.Fatalf("EvictionPolicy with the server down = %v", err)
			}
			u, p := writes(t, s)
			for _, err := range []error{u, p} {
				if !errors.Is(err, ErrStoreUnavailable) || errors.Is(err, ErrEvictionRisk) {
					t.Fatalf("write with the server down = %v, want ErrStoreUnavailable", err)
				}
			}
			srv.Restart()
			if policy == NoEviction {
				wantAllowed(t, "server back with noeviction", s)
				return
			}
			wantRefused(t, "server back with allkeys-lru", s, "allkeys-lru")
		})
	}
}
