package caddymodule

import "github.com/redis/go-redis/v9"

// RateLimitRedis lends the store's client to the edge's rate limits, with
// the key prefix the store reserves for them: the limits count in the same
// Redis, over the same connections, as the store (nil before Provision).
func (s *RedisNonceStore) RateLimitRedis() (redis.UniversalClient, string) {
	if s.store == nil {
		return nil, ""
	}
	return s.store.RateLimitRedis()
}
