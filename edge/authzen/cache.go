package authzen

import (
	"sync"
	"time"
)

// cache keeps decisions for a while, bounded. It holds only decisions the
// PDP gave: an error (timeout, malformed answer) is never kept, so an
// outage's refusals do not outlive it.
type cache struct {
	ttl time.Duration
	max int

	mu sync.Mutex
	m  map[[32]byte]cached
}

type cached struct {
	d   Decision
	exp time.Time
}

func newCache(ttl time.Duration, size int) *cache {
	if ttl <= 0 {
		return nil
	}
	if size <= 0 {
		size = DefaultCacheSize
	}
	return &cache{ttl: ttl, max: size, m: make(map[[32]byte]cached)}
}

func (c *cache) get(k [32]byte, now time.Time) (Decision, bool) {
	if c == nil {
		return Decision{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return Decision{}, false
	}
	if !now.Before(e.exp) {
		delete(c.m, k)
		return Decision{}, false
	}
	return e.d, true
}

// put keeps d. When the cache is full, expired entries go first, then
// arbitrary ones: the bound holds whatever callers send.
func (c *cache) put(k [32]byte, d Decision, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for key, e := range c.m {
			if !now.Before(e.exp) {
				delete(c.m, key)
			}
		}
		for key := range c.m {
			if len(c.m) < c.max {
				break
			}
			delete(c.m, key)
		}
	}
	c.m[k] = cached{d: d, exp: now.Add(c.ttl)}
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
