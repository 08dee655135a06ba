package challenge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// An anonymous handshake in proxy mode makes the edge record the
// upstream's challenge, and Redis has no per-kind bound of its own: a flood
// of handshakes would grow a shared Redis until its maxmemory, and under
// noeviction every caller sharing it would then be refused. The records
// are counted in a fixed window as long as a record lives (one key, INCR
// and PEXPIRE in one script, so it works on any node of a cluster): over
// the bound, the handshake is refused without writing anything, so at most
// twice the bound of proxied challenges is ever held.

// DefaultProxyChallengeBound is how many proxied challenges one store
// prefix records per challenge lifetime (challenge_ttl plus skew) by
// default: a few tens of MB of Redis at most.
const DefaultProxyChallengeBound = 100_000

// ErrTooManyChallenges is wrapped, beside ErrStoreFull, by the error of a
// proxied handshake refused because the store holds as many proxied
// challenges as its bound allows.
var ErrTooManyChallenges = errors.New("challenge: the store holds as many proxied handshake challenges as it may " +
	"(a flood of anonymous handshakes, or a bound too small); put a limiter keyed by client address in front of the handshake endpoint")

// ChallengeCounter is implemented by a store that bounds the challenges
// recorded for proxied handshakes (Redis; the memory store bounds every
// record by max_entries instead).
type ChallengeCounter interface {
	// CountChallenge counts one record against bound per window; over it,
	// it fails with an error wrapping ErrTooManyChallenges and
	// ErrStoreFull, and with one wrapping ErrStoreUnavailable when the
	// store cannot be used. errors.ErrUnsupported: no bound here.
	CountChallenge(ctx context.Context, window time.Duration, bound int) error
}

// redisProxyCountPrefix starts the counter's key, after the store's
// prefix; reserved (isReservedName): a client's nonce must never consume
// (reset) the counter, nor a record take its place.
const (
	redisProxyCountPrefix = "l3-proxied:"
	redisProxyCountKey    = redisProxyCountPrefix + "count"
)

// countScript increments KEYS[1], starting its window (ARGV[1] ms) on the
// first count, and answers the count.
var countScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n
`)

// CountChallenge implements ChallengeCounter.
func (s *RedisStore) CountChallenge(ctx context.Context, window time.Duration, bound int) error {
	if s.proxied > 0 {
		bound = s.proxied // the operator's, sized for this Redis
	}
	if bound <= 0 {
		return nil
	}
	n, err := countScript.Run(ctx, s.client, []string{s.prefix + redisProxyCountKey}, max(window.Milliseconds(), 1)).Int64()
	if err != nil {
		return s.health.note(redisWriteError(err))
	}
	if n > int64(bound) {
		return fmt.Errorf("%w: %w (%d per %v)", ErrStoreFull, ErrTooManyChallenges, bound, window)
	}
	return s.health.note(nil)
}

// CountChallenge implements ChallengeCounter for the store Watched wraps.
func (w Watched) CountChallenge(ctx context.Context, window time.Duration, bound int) error {
	c, ok := w.store.(ChallengeCounter)
	if !ok {
		return errors.ErrUnsupported
	}
	return w.note(c.CountChallenge(ctx, window, bound))
}
