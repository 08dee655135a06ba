package challenge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bind implements SessionBinder with "SET <prefix>sess:<key> value PX ttl".
func (s *RedisStore) Bind(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return fmt.Errorf("challenge: redis store: ttl must be at least 1ms")
	}
	res, err := s.client.Do(ctx, "SET", s.bindingKey(key), value, "PX", ms).Result()
	if err != nil {
		return s.health.note(redisWriteError(err))
	}
	if str, ok := res.(string); !ok || str != "OK" {
		return s.health.note(fmt.Errorf("%w: unexpected SET reply", ErrStoreUnavailable))
	}
	return s.health.note(nil)
}

// Lookup implements SessionBinder with "GET <prefix>sess:<key>".
func (s *RedisStore) Lookup(ctx context.Context, key string) ([]byte, error) {
	val, err := s.client.Get(ctx, s.bindingKey(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, s.health.note(ErrBindingNotFound)
	}
	if err != nil {
		return nil, s.health.note(fmt.Errorf("%w: %w", ErrStoreUnavailable, err))
	}
	return val, s.health.note(nil)
}

// bindingKey is where the binding under key is kept. Nonces live under
// the bare prefix; a nonce spelt "sess:<key>" would share the name, which
// is why callers bind under hashes no client can choose (and decode what
// they look up strictly).
func (s *RedisStore) bindingKey(key string) string { return s.prefix + redisBindingPrefix + key }

var _ SessionBinder = (*RedisStore)(nil)
