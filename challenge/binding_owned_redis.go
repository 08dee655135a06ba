package challenge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// indexOwnedScript indexes a binding in its owner's sorted set KEYS[1]
// (member: the binding's key, score: its expiry in ms), in one step:
// expired members leave the index, and past ARGV[4] live members the
// owner's oldest leave it too; their names are returned for the caller to
// delete. The index lives as long as its newest binding.
//
// It touches only KEYS[1]: the bindings are other keys, which in a cluster
// live on other nodes, so the caller sets and deletes them with commands
// of their own.
//
// ARGV: the binding's key, ttl (ms), now (ms), max.
var indexOwnedScript = redis.NewScript(`
local ttl = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local max = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREM', KEYS[1], ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
local evicted = {}
if n >= max then
  local old = redis.call('ZPOPMIN', KEYS[1], n - max + 1)
  for i = 1, #old, 2 do evicted[#evicted + 1] = old[i] end
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return evicted
`)

// BindOwned implements OwnedBinder: the binding is an ordinary one (Lookup
// finds it), and its owner's index is a sorted set under
// "<prefix>own:<kind>:<hash of owner>". The owner's oldest go when it holds
// max; Redis bounds nothing else (size it, with maxmemory-policy
// noeviction: docs/deployment.md).
//
// Three steps, each on one key, so that they run on a cluster whatever
// node holds each: the index is updated first (a new binding is counted
// before it exists, so an owner never holds more than max that the index
// does not know of), then the binding is set, then the bindings the index
// let go are deleted, one DEL each. A failure between the steps leaves
// at worst an index member without its binding, or an evicted binding that
// lives out its TTL: neither lets an owner hold more than it was allowed
// for longer than a TTL.
func (s *RedisStore) BindOwned(ctx context.Context, kind, owner, key string, value []byte, ttl time.Duration, max int) error {
	if err := checkOwnedArgs(kind, owner, ttl, max); err != nil {
		return err
	}
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return fmt.Errorf("challenge: redis store: ttl must be at least 1ms")
	}
	sum := sha256.Sum256([]byte(owner))
	index := s.prefix + "own:" + kind + ":" + hex.EncodeToString(sum[:])
	bkey := s.bindingKey(key)
	now := time.Now().UnixMilli()
	evicted, err := indexOwnedScript.Run(ctx, s.client, []string{index}, bkey, ms, now, max).StringSlice()
	if err != nil {
		return s.health.note(fmt.Errorf("%w: %w", ErrStoreUnavailable, err))
	}
	if err := s.Bind(ctx, key, value, ttl); err != nil {
		return err
	}
	bindings := s.prefix + redisBindingPrefix
	for _, old := range evicted {
		// The index holds only names this store wrote; anything else is
		// not ours to delete.
		if !strings.HasPrefix(old, bindings) || old == bkey {
			continue
		}
		if err := s.client.Del(ctx, old).Err(); err != nil {
			return s.health.note(fmt.Errorf("%w: %w", ErrStoreUnavailable, err))
		}
	}
	return nil
}

// Take implements OwnedBinder with "GETDEL <prefix>sess:<key>" (the
// owner's index keeps the name until it is trimmed).
func (s *RedisStore) Take(ctx context.Context, key string) ([]byte, error) {
	val, err := s.client.GetDel(ctx, s.bindingKey(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrBindingNotFound
	}
	if err != nil {
		return nil, s.health.note(fmt.Errorf("%w: %w", ErrStoreUnavailable, err))
	}
	return val, nil
}

var _ OwnedBinder = (*RedisStore)(nil)
