package caddymodule

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// TestRedisStoreRefusesEviction: a Redis that may evict the edge's keys
// (maxmemory set, any policy but noeviction) is refused at provision with
// an error that says what to set, unless accept_eviction says the operator
// knows; a Redis that cannot be reached is not refused.
func TestRedisStoreRefusesEviction(t *testing.T) {
	ctx := bareContext(t)
	rec := challenge.Record{Challenge: "c", ExpiresAt: time.Now().Add(time.Minute)}
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl", "allkeys-random"} {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.StartWith(t, "--maxmemory", "10mb", "--maxmemory-policy", policy)
			s := &RedisNonceStore{URL: srv.URL()}
			err := s.Provision(ctx)
			if err == nil {
				_ = s.Cleanup()
				t.Fatalf("Provision on a %s server succeeded", policy)
			}
			for _, want := range []string{policy, "maxmemory-policy noeviction", "accept_eviction"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			// Caddy cleans a module up after a failed Provision; the
			// refused client is released already.
			if err := s.Cleanup(); err != nil {
				t.Errorf("Cleanup after refusal: %v", err)
			}
			if err := s.Put(context.Background(), "n", rec, time.Minute); !errors.Is(err, challenge.ErrStoreUnavailable) {
				t.Errorf("Put through a refused store = %v, want ErrStoreUnavailable", err)
			}

			accepted := &RedisNonceStore{URL: srv.URL(), AcceptEviction: true}
			if err := accepted.Provision(ctx); err != nil {
				t.Fatalf("Provision with accept_eviction: %v", err)
			}
			t.Cleanup(func() { _ = accepted.Cleanup() })
			if err := accepted.Put(context.Background(), "n", rec, time.Minute); err != nil {
				t.Fatalf("Put with accept_eviction: %v", err)
			}
		})
	}
	t.Run("noeviction", func(t *testing.T) {
		srv := redistest.StartWith(t, "--maxmemory", "10mb", "--maxmemory-policy", "noeviction")
		s := &RedisNonceStore{URL: srv.URL()}
		if err := s.Provision(ctx); err != nil {
			t.Fatalf("Provision on a noeviction server: %v", err)
		}
		_ = s.Cleanup()
	})
	t.Run("unreachable", func(t *testing.T) {
		srv := redistest.StartWith(t, "--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru")
		srv.Stop()
		s := &RedisNonceStore{URL: srv.URL(), KeyPrefix: "down:", Timeout: caddy.Duration(200 * time.Millisecond)}
		if err := s.Provision(ctx); err != nil {
			t.Fatalf("Provision with Redis down: %v (Caddy must start, failing closed per request)", err)
		}
		t.Cleanup(func() { _ = s.Cleanup() })
		if err := s.Put(context.Background(), "n", rec, time.Minute); !errors.Is(err, challenge.ErrStoreUnavailable) {
			t.Fatalf("Put with Redis down = %v, want ErrStoreUnavailable", err)
		}
	})
}

// TestRedisStoreRefusesUnknownPolicy: an ACL user without INFO and
// CONFIG gets an error reply when asked the policy; the server answered,
// so Caddy does not start, and says to grant INFO or to accept eviction.
func TestRedisStoreRefusesUnknownPolicy(t *testing.T) {
	srv := redistest.StartWith(t, "--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru")
	if out, err := srv.CLI("ACL", "SETUSER", "edge", "on", ">edgepw", "~*", "+@all", "-info", "-config"); err != nil {
		t.Fatalf("ACL SETUSER: %v %s", err, out)
	}
	url := "redis://edge:edgepw@" + srv.Addr()
	s := &RedisNonceStore{URL: url, WaitReplicas: "off"}
	err := s.Provision(bareContext(t))
	if err == nil {
		_ = s.Cleanup()
		t.Fatal("Provision with a user that may not read the policy succeeded")
	}
	for _, want := range []string{"NOPERM", "+info", "noeviction", "accept_eviction"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	_ = s.Cleanup()

	accepted := &RedisNonceStore{URL: url, WaitReplicas: "off", AcceptEviction: true}
	if err := accepted.Provision(bareContext(t)); err != nil {
		t.Fatalf("Provision with accept_eviction: %v", err)
	}
	t.Cleanup(func() { _ = accepted.Cleanup() })
	if err := accepted.UseOnce(context.Background(), [32]byte{1}, time.Minute); err != nil {
		t.Fatalf("UseOnce with accept_eviction: %v", err)
	}
}

// TestRedisStoreEvictionAlarm: when the policy changes under a running
// store, its single-use writes fail closed, and the log says why and what
// to set, once however many are refused.
func TestRedisStoreEvictionAlarm(t *testing.T) {
	srv := redistest.Start(t)
	s, logs := alarmedRedisStore(t, srv, "alarm:")
	ctx := context.Background()
	if err := s.UseOnce(ctx, [32]byte{1}, time.Minute); err != nil {
		t.Fatalf("UseOnce on a noeviction server: %v", err)
	}
	if _, err := srv.CLI("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
		t.Fatal(err)
	}
	// A new connection reads the policy before carrying a write.
	if _, err := srv.CLI("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
		t.Fatal(err)
	}
	_ = s.UseOnce(ctx, [32]byte{2}, time.Minute) // may meet its killed connection
	for i := range 10 {
		err := s.UseOnce(ctx, [32]byte{3, byte(i)}, time.Minute)
		if !errors.Is(err, challenge.ErrStoreUnavailable) || !errors.Is(err, challenge.ErrEvictionRisk) {
			t.Fatalf("UseOnce %d on an allkeys-lru server = %v, want refused", i, err)
		}
	}
	lines := logs.FilterLevelExact(zap.ErrorLevel).All()
	if len(lines) != 1 {
		t.Fatalf("%d ERROR lines for 10 refused writes, want 1: %v", len(lines), lines)
	}
	msg := lines[0].Message + " " + lines[0].ContextMap()["error"].(string)
	for _, want := range []string{"allkeys-lru", "maxmemory-policy noeviction", "accept_eviction", "+info"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the ERROR line does not say %q: %s", want, msg)
		}
	}
}

func TestRedisStoreCaddyfileAcceptEviction(t *testing.T) {
	for _, tc := range []struct {
		input, err string
		accept     bool
	}{
		{input: "redis redis://r:6379 {\n accept_eviction\n}", accept: true},
		{input: "redis redis://r:6379"},
		{input: "redis redis://r:6379 {\n accept_eviction yes\n}", err: "wrong argument count"},
		{input: "redis redis://r:6379 {\n accept_eviction\n accept_eviction\n}", err: "already specified"},
	} {
		var s RedisNonceStore
		err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.input, err, tc.err)
			}
			continue
		}
		if err != nil || s.AcceptEviction != tc.accept || s.TLS {
			t.Errorf("%q: %+v, %v", tc.input, s, err)
		}
	}
}

// alarmedRedisStore is a provisioned store in srv whose alarm lines are
// observed.
func alarmedRedisStore(t *testing.T, srv *redistest.Server, prefix string) (*RedisNonceStore, *observer.ObservedLogs) {
	t.Helper()
	s := &RedisNonceStore{URL: srv.URL(), KeyPrefix: prefix}
	if err := s.Provision(bareContext(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup() })
	core, logs := observer.New(zap.InfoLevel)
	s.alarm.logger = zap.New(core)
	return s, logs
}
