package challenge

import "github.com/redis/go-redis/v9"

// redisRateLimitPrefix follows the store's key prefix for the counters of
// the edge's rate limits, which share the store's client (and so its
// connections, deployment kind, TLS and credentials). Reserved: a nonce
// chosen by a client must never consume (GETDEL) a counter, which would
// hand its caller a fresh burst.
const redisRateLimitPrefix = "ratelimit:"

// RateLimitRedis returns the store's client and the key prefix reserved
// for rate limit counters. The client stays the store's: Close closes it.
func (s *RedisStore) RateLimitRedis() (redis.UniversalClient, string) {
	return s.client, s.prefix + redisRateLimitPrefix
}
