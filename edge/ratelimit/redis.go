package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrUnavailable wraps every failure to reach the Redis store.
var ErrUnavailable = errors.New("ratelimit: the shared store could not be reached")

// gcraScript is GCRA on one key (KEYS[1]) in one round trip. ARGV: the
// interval and the burst's span (burst × interval) in microseconds, and the
// calls to count (negative: calls given back). The time is the Redis
// server's, so that replicas whose clocks disagree still count as one; the
// key expires when its burst is whole again, which changes no decision.
// It answers {allowed, retry after in µs, remaining, fresh}: fresh is 1
// when the key held no live count before.
//
// redis.replicate_commands makes TIME allowed before a write on Redis 5
// and older (later versions replicate a script's effects anyway).
var gcraScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local interval = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = now
local fresh = 1
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = tonumber(stored) or now
  if tat > now then fresh = 0 else tat = now end
end
local nxt = tat + n * interval
local at = nxt - tau
if at > now then
  return {0, at - now, math.floor((now + tau - tat) / interval), fresh}
end
if nxt > now then
  redis.call('SET', KEYS[1], string.format('%d', nxt), 'PX', math.ceil((nxt - now) / 1000))
else
  redis.call('DEL', KEYS[1])
end
return {1, 0, math.floor((now + tau - nxt) / interval), fresh}
`)

// Redis is a Store shared by every replica using the same Redis (a
// standalone server, a Sentinel-managed master or a Cluster: each
// decision touches one key, so any key may live on any node). It uses a
// client someone else owns (the nonce store's), and never closes it.
type Redis struct {
	client redis.UniversalClient
}

// NewRedis counts in Redis through client.
func NewRedis(client redis.UniversalClient) *Redis { return &Redis{client: client} }

// ErrOutOfMemory is wrapped, beside ErrUnavailable, by the error of a
// count Redis refused because it reached its maxmemory and may not evict
// (noeviction): the store is up, and full.
var ErrOutOfMemory = errors.New("ratelimit: Redis is out of memory (used_memory reached maxmemory under noeviction); raise its maxmemory")

// Take implements Store. Every failure wraps ErrUnavailable; Redis's
// out-of-memory refusal ErrOutOfMemory too.
func (s *Redis) Take(ctx context.Context, key string, q Quota, n int) (Result, error) {
	interval := q.Interval.Microseconds()
	res, err := gcraScript.Run(ctx, s.client, []string{key}, interval, interval*int64(q.Burst), n).Int64Slice()
	if err != nil {
		if redis.HasErrorPrefix(err, "OOM") || strings.Contains(err.Error(), "OOM command not allowed") {
			// A script's write refused for memory may come back with
			// the script's own prefix.
			return Result{}, fmt.Errorf("%w: %w: %w", ErrUnavailable, ErrOutOfMemory, err)
		}
		return Result{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if len(res) != 4 {
		return Result{}, fmt.Errorf("%w: unexpected script reply", ErrUnavailable)
	}
	return Result{Allowed: res[0] == 1, RetryAfter: time.Duration(res[1]) * time.Microsecond, Remaining: int(res[2]), Fresh: res[3] == 1}, nil
}
