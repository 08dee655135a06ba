package ratelimit

import (
	"sync"

	"github.com/redis/go-redis/v9"
)

// redisBacked is a nonce store on Redis that lends its client to the
// limits, with the key prefix it reserves for them.
type redisBacked interface {
	RateLimitRedis() (redis.UniversalClient, string)
}

// processMemory is the Memory store every limit of this process counts in
// without Redis: routes and sites with the same limit share its counters
// (a counter's key names its limit), and a config reload keeps them, so
// that reloading does not hand every caller a fresh allowance.
var processMemory = sync.OnceValue(func() *Memory { return NewMemory(0, nil) })

// StoreFor returns where limits count beside nonceStore: in its Redis,
// shared with every replica using it, when it is on one; else in the
// Memory store of this process. prefix is for New's Options.
func StoreFor(nonceStore any) (store Store, prefix string) {
	if rb, ok := nonceStore.(redisBacked); ok {
		if client, prefix := rb.RateLimitRedis(); client != nil {
			return NewRedis(client), prefix
		}
	}
	return processMemory(), ""
}
