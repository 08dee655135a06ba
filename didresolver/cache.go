package didresolver

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

const (
	defaultTTL             = 5 * time.Minute
	defaultNegativeTTL     = 30 * time.Second
	defaultMaxEntries      = 10000
	defaultRefreshInterval = 30 * time.Second
)

// CacheOption configures NewCache.
type CacheOption func(*Cache)

// Cache wraps a Resolver with a bounded TTL cache, a negative cache, one
// fetch in flight per DID, and rate-limited Refresh. It implements Resolver
// and Refresher. Use NewCache; the zero value is not usable.
//
// did:key and did:jwk bypass the cache: resolving them is cheaper than a
// cache lookup, and caching them would let anyone evict did:web documents
// by presenting throwaway keys.
//
// A fetch runs detached from the caller's cancellation, so that one caller
// giving up does not fail the others waiting on the same fetch and the
// result is still cached; callers still return as soon as their context
// ends. The wrapped resolver must therefore bound its own fetches, as New's
// did:web resolver does with WithTimeout.
type Cache struct {
	next            Resolver
	ttl             time.Duration
	negativeTTL     time.Duration
	maxEntries      int
	refreshInterval time.Duration
	now             func() time.Time

	group singleflight.Group

	mu      sync.Mutex
	entries map[string]*list.Element // of *cacheEntry
	lru     *list.List               // front: most recently used
}

type cacheEntry struct {
	did     string
	doc     *Document
	err     error
	expires time.Time
	fetched time.Time // when the last upstream fetch completed
}

// WithTTL: how long a resolved document is kept. Default 5m. Non-positive
// values keep the default.
func WithTTL(d time.Duration) CacheOption {
	return func(c *Cache) {
		if d > 0 {
			c.ttl = d
		}
	}
}

// WithNegativeTTL: how long a failure is remembered. Default 30s. Zero
// disables negative caching; negative values keep the default.
func WithNegativeTTL(d time.Duration) CacheOption {
	return func(c *Cache) {
		if d >= 0 {
			c.negativeTTL = d
		}
	}
}

// WithMaxEntries bounds the cache. Default 10000. Non-positive values keep
// the default.
func WithMaxEntries(n int) CacheOption {
	return func(c *Cache) {
		if n > 0 {
			c.maxEntries = n
		}
	}
}

// WithRefreshInterval: minimum time between two Refresh fetches of one DID. Default 30s.
// Zero disables the limit; negative values keep the default.
func WithRefreshInterval(d time.Duration) CacheOption {
	return func(c *Cache) {
		if d >= 0 {
			c.refreshInterval = d
		}
	}
}

// WithCacheClock injects a clock.
func WithCacheClock(now func() time.Time) CacheOption {
	return func(c *Cache) {
		if now != nil {
			c.now = now
		}
	}
}

// NewCache wraps next.
func NewCache(next Resolver, opts ...CacheOption) *Cache {
	c := &Cache{
		next:            next,
		ttl:             defaultTTL,
		negativeTTL:     defaultNegativeTTL,
		maxEntries:      defaultMaxEntries,
		refreshInterval: defaultRefreshInterval,
		now:             time.Now,
		entries:         make(map[string]*list.Element),
		lru:             list.New(),
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// Resolve implements Resolver.
func (c *Cache) Resolve(ctx context.Context, did string) (*Document, error) {
	key, pure, err := cacheKey(did)
	if err != nil {
		return nil, err
	}
	if pure {
		return c.next.Resolve(ctx, key)
	}
	if e, ok := c.lookup(key, false); ok {
		return e.doc, e.err
	}
	return c.fetch(ctx, key, false)
}

// Refresh implements Refresher. Within the refresh interval of the last
// fetch of did it returns the cached result instead of fetching again.
func (c *Cache) Refresh(ctx context.Context, did string) (*Document, error) {
	key, pure, err := cacheKey(did)
	if err != nil {
		return nil, err
	}
	if pure {
		return c.next.Resolve(ctx, key)
	}
	if e, ok := c.lookup(key, true); ok {
		return e.doc, e.err
	}
	return c.fetch(ctx, key, true)
}

// cacheKey normalises did (dropping any fragment) so that DID URLs of one
// DID share an entry.
func cacheKey(did string) (key string, pure bool, err error) {
	d, err := ParseDID(did)
	if err != nil {
		return "", false, err
	}
	return d.String(), d.Method == "key" || d.Method == "jwk", nil
}

// lookup returns an unexpired entry. For a refresh, only an entry fetched
// within the refresh interval counts.
func (c *Cache) lookup(key string, refresh bool) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return cacheEntry{}, false
	}
	e := el.Value.(*cacheEntry)
	now := c.now()
	if !now.Before(e.expires) {
		return cacheEntry{}, false
	}
	if refresh && now.Sub(e.fetched) >= c.refreshInterval {
		return cacheEntry{}, false
	}
	c.lru.MoveToFront(el)
	return *e, true
}

func (c *Cache) fetch(ctx context.Context, key string, refresh bool) (*Document, error) {
	ch := c.group.DoChan(key, func() (any, error) {
		// A caller that missed the cache just before another fetch of this
		// DID finished would otherwise fetch again.
		if e, ok := c.lookup(key, refresh); ok {
			return e.doc, e.err
		}
		doc, err := c.next.Resolve(context.WithoutCancel(ctx), key)
		if err == nil && doc == nil {
			err = fmt.Errorf("%w: resolver returned no document", ErrInvalidDocument)
		}
		c.store(key, doc, err)
		return doc, err
	})
	select {
	case res := <-ch:
		doc, _ := res.Val.(*Document)
		if res.Err != nil {
			return nil, res.Err
		}
		return doc, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrFetch, ctx.Err())
	}
}

func (c *Cache) store(key string, doc *Document, err error) {
	// Failures that say nothing about the DID's document are not
	// remembered: a cancelled fetch, and syntax errors that are cheaper to
	// recompute than to cache (and would only crowd out real entries).
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, ErrInvalidDID) || errors.Is(err, ErrUnsupportedMethod)) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	el, ok := c.entries[key]
	var e *cacheEntry
	if ok {
		e = el.Value.(*cacheEntry)
		c.lru.MoveToFront(el)
	} else {
		e = &cacheEntry{did: key}
	}
	switch {
	case err == nil:
		e.doc, e.err, e.expires = doc, nil, now.Add(c.ttl)
	case ok && e.doc != nil && now.Before(e.expires):
		// A failed refresh keeps the document that is still valid: a
		// transient outage of the DID's host must not break verification
		// of keys it has already published.
	case c.negativeTTL > 0:
		e.doc, e.err, e.expires = nil, err, now.Add(c.negativeTTL)
	default:
		if ok {
			c.lru.Remove(el)
			delete(c.entries, key)
		}
		return
	}
	e.fetched = now
	if !ok {
		c.entries[key] = c.lru.PushFront(e)
	}
	for c.lru.Len() > c.maxEntries {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.entries, old.Value.(*cacheEntry).did)
	}
}

// didKey implements didKeyResolver when the wrapped resolver does: a
// did:key bypasses the cache (see Cache).
func (c *Cache) didKey(d DID) (*derivedKey, bool, error) {
	if kr, ok := c.next.(didKeyResolver); ok {
		return kr.didKey(d)
	}
	return nil, false, nil
}

var (
	_ Resolver       = (*Cache)(nil)
	_ Refresher      = (*Cache)(nil)
	_ didKeyResolver = (*Cache)(nil)
)
