package challenge

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
// policy an error wrapping ErrPolicyUnknown.
func (s *RedisStore) EvictionPolicy(ctx context.Context) (string, error) {
	info, err := s.client.Info(ctx, "memory").Result()
	if err != nil {
		return "", fmt.Errorf("%w: INFO memory: %w", ErrStoreUnavailable, err)
	}
	if p, ok := infoField(info, "maxmemory_policy"); ok && p != "" {
		return p, nil
	}
	cfg, err := s.client.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		var reply redis.Error
		if !errors.As(err, &reply) {
			return "", fmt.Errorf("%w: CONFIG GET maxmemory-policy: %w", ErrStoreUnavailable, err)
		}
		return "", fmt.Errorf("%w: INFO memory has no maxmemory_policy and CONFIG GET maxmemory-policy failed: %w", ErrPolicyUnknown, err)
	}
	if p := cfg["maxmemory-policy"]; p != "" {
		return p, nil
	}
	return "", fmt.Errorf("%w: neither INFO memory nor CONFIG GET reports it", ErrPolicyUnknown)
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
