package challenge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"

	"github.com/redis/go-redis/v9"
)

// NoEviction is the maxmemory-policy under which Redis never drops a key to
// make room: the only policy under which a stored challenge, binding or
// single-use marker lasts its whole TTL. Every key the store writes has a
// TTL, so the volatile-* policies may evict them as much as the allkeys-*
// ones do.
const NoEviction = "noeviction"

// ErrPolicyUnknown: Redis answered but would not tell its
// maxmemory-policy.
var ErrPolicyUnknown = errors.New("challenge: Redis maxmemory-policy unknown")

// EvictionPolicy returns the server's maxmemory-policy, read from INFO
// memory (which managed services that disable CONFIG still answer), or from
// CONFIG GET when INFO does not report it. A server that cannot be reached
// gives an error wrapping ErrStoreUnavailable; one that answers without the
// policy an error wrapping ErrPolicyUnknown: an error reply, such as
// NOPERM for an ACL user without INFO and CONFIG, is an answer. In a
// cluster every master is asked, and the first policy that is not
// noeviction is returned. What it reads also sets whether the store
// allows single-use writes (redis_eviction_guard.go).
func (s *RedisStore) EvictionPolicy(ctx context.Context) (string, error) {
	p, err := s.readEvictionPolicy(ctx)
	if s.evict != nil {
		s.evict.record(p, err, true)
	}
	return p, err
}

func (s *RedisStore) readEvictionPolicy(ctx context.Context) (string, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		p, err := evictionPolicy(ctx, s.client)
		s.health.note(err)
		return p, err
	}
	var mu sync.Mutex
	worst := NoEviction
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		p, err := evictionPolicy(ctx, node)
		if err != nil {
			return fmt.Errorf("node %s: %w", node.Options().Addr, err)
		}
		mu.Lock()
		if p != NoEviction {
			worst = p
		}
		mu.Unlock()
		return nil
	})
	if err != nil && !errors.Is(err, ErrStoreUnavailable) && !errors.Is(err, ErrPolicyUnknown) {
		// No master known yet: the cluster's nodes did not answer.
		err = fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	s.health.note(err)
	if err != nil {
		return "", err
	}
	return worst, nil
}

func evictionPolicy(ctx context.Context, c redis.UniversalClient) (string, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil && !isAnswer(err) {
		return "", fmt.Errorf("%w: INFO memory: %w", ErrStoreUnavailable, err)
	}
	infoErr := err
	if p, ok := infoField(info, "maxmemory_policy"); err == nil && ok && p != "" {
		return p, nil
	}
	cfg, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		if !isAnswer(err) {
			return "", fmt.Errorf("%w: CONFIG GET maxmemory-policy: %w", ErrStoreUnavailable, err)
		}
		if infoErr != nil {
			return "", fmt.Errorf("%w: INFO memory: %w; CONFIG GET maxmemory-policy: %w", ErrPolicyUnknown, infoErr, err)
		}
		return "", fmt.Errorf("%w: INFO memory has no maxmemory_policy and CONFIG GET maxmemory-policy failed: %w", ErrPolicyUnknown, err)
	}
	if p := cfg["maxmemory-policy"]; p != "" {
		return p, nil
	}
	return "", fmt.Errorf("%w: neither INFO memory nor CONFIG GET reports it", ErrPolicyUnknown)
}

// isAnswer reports whether err is the server's reply (NOPERM, an unknown
// or renamed command), as opposed to a failure to reach it or a state it
// is passing through (loading its data, a failover, a cluster
// reconfiguring), which say nothing about its policy. A refused password
// is left to fail every command, as it always has.
func isAnswer(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	for _, transient := range []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOAUTH", "WRONGPASS"} {
		if strings.HasPrefix(reply.Error(), transient+" ") {
			return false
		}
	}
	return true
}

// maxInfoLine bounds the lines infoField looks at: INFO's are short, and a
// value longer than this is not one the edge would understand.
const maxInfoLine = 256

// infoField returns the value of field in the text of an INFO reply
// ("field:value" lines, "# Section" headers, CRLF or LF line ends). A value
// with control characters is not one Redis writes, and counts as absent.
func infoField(info, field string) (string, bool) {
	for line := range strings.Lines(info) {
		line = strings.TrimRight(line, "\r\n")
		if len(line) > maxInfoLine || strings.HasPrefix(line, "#") {
			continue
		}
		name, val, ok := strings.Cut(line, ":")
		if ok && name == field {
			val = strings.TrimSpace(val)
			if strings.ContainsFunc(val, unicode.IsControl) {
				return "", false
			}
			return val, true
		}
	}
	return "", false
}
