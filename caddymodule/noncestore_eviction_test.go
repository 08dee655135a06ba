package caddymodule

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge"
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
			s := &RedisNonceStore{RedisConfig: challenge.RedisConfig{URL: srv.URL()}}
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

			accepted := &RedisNonceStore{RedisConfig: challenge.RedisConfig{URL: srv.URL(), AcceptEviction: true}}
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
		s := &RedisNonceStore{RedisConfig: challenge.RedisConfig{URL: srv.URL()}}
		if err := s.Provision(ctx); err != nil {
			t.Fatalf("Provision on a noeviction server: %v", err)
		}
		_ = s.Cleanup()
	})
	t.Run("unreachable", func(t *testing.T) {
		srv := redistest.StartWith(t, "--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru")
		srv.Stop()
		s := &RedisNonceStore{RedisConfig: challenge.RedisConfig{URL: srv.URL(), KeyPrefix: "down:", Timeout: edge.Duration(200 * time.Millisecond)}}
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
	s := &RedisNonceStore{RedisConfig: challenge.RedisConfig{URL: url, WaitReplicas: "off"}}
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

	accepted := &RedisNonceStore{RedisConfig: challenge.RedisConfig{URL: url, WaitReplicas: "off", AcceptEviction: true}}
	if err := accepted.Provision(bareContext(t)); err != nil {
		t.Fatalf("Provision with accept_eviction: %v", err)
	}
	t.Cleanup(func() { _ = accepted.Cleanup() })
	if err := accepted.UseOnce(context.Background(), [32]byte{1}, time.Minute); err != nil {
		t.Fatalf("UseOnce with accept_eviction: %v", err)
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
