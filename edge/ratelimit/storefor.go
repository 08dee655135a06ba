package ratelimit

import "github.com/redis/go-redis/v9"

// redisBacked is a nonce store on Redis that lends its client to the
// limits, with the key prefix it reserves for them.
type redisBacked interface {
	RateLimitRedis() (redis.UniversalClient, string)
}

// StoreFor returns where limits count beside nonceStore: in its Redis,
// shared with every replica using it, when it is on one; else in a Memory
// store of this process. prefix is for New's Options.
func StoreFor(nonceStore any) (store Store, prefix string) {
	if rb, ok := nonceStore.(redisBacked); ok {
		if client, prefix := rb.RateLimitRedis(); client != nil {
			return NewRedis(client), prefix
		}
	}
	return NewMemory(0, nil), ""
}
