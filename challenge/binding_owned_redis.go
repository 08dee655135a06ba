package challenge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// bindOwnedScript binds KEYS[2] and indexes it in its owner's sorted set
// KEYS[1] (member: the binding's key, score: its expiry in ms), in one
// step: expired members leave the index, and past ARGV[4] live members
// the owner's oldest bindings are deleted with their members. The index
// lives as long as its newest binding.
//
// ARGV: value, ttl (ms), now (ms), max.
var bindOwnedScript = redis.NewScript(`
local ttl = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local max = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREM', KEYS[1], KEYS[2])
local n = redis.call('ZCARD', KEYS[1])
if n >= max then
  local old = redis.call('ZPOPMIN', KEYS[1], n - max + 1)
  for i = 1, #old, 2 do redis.call('DEL', old[i]) end
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
redis.call('ZADD', KEYS[1], now + ttl, KEYS[2])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
`)

// BindOwned implements OwnedBinder: the binding is an ordinary one (Lookup
// finds it), and its owner's index is a sorted set under
// "<prefix>own:<kind>:<hash of owner>". The owner's oldest go when it holds
// max; Redis bounds nothing else (size it, with maxmemory-policy
// noeviction: docs/deployment.md).
//
// The script touches keys it finds in the index (the owner's older
// bindings): it runs on one Redis, not across the slots of a cluster.
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
	now := time.Now().UnixMilli()
	err := bindOwnedScript.Run(ctx, s.client, []string{index, s.bindingKey(key)}, value, ms, now, max).Err()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	return nil
}

var _ OwnedBinder = (*RedisStore)(nil)
