package challenge

import (
	"sync"
	"time"
)

// recentMarkers is a Redis store's local filter: the digests of the
// single-use markers this process wrote (and, where writes wait for
// replicas, saw acknowledged) or, where they do not wait, found already
// written, for their time to live, so that a replay to the same replica
// is refused without a round trip. It is bounded: when full, the oldest
// entry is forgotten, and a digest it no longer holds is asked of Redis
// as any other. It only ever refuses what Redis holds (or held, before a
// failover lost it), never admits: a marker is added once it is relied
// on, never for a write that failed or may yet be taken back
// (RedisStore.settled).
type recentMarkers struct {
	mu sync.Mutex
	// expiry holds each digest's expiry (Unix nanoseconds).
	expiry map[[32]byte]int64
	// ring holds the digests in the order they were added, up to max;
	// once full, next is the oldest, which the next digest replaces.
	ring []usedSlot
	max  int
	next int
}

// maxRecentMarkers bounds the filter: a few MB, a minute of a busy
// replica's proofs.
const maxRecentMarkers = 1 << 16

// newRecentMarkers returns a filter of at most n digests; its memory is
// taken as they come.
func newRecentMarkers(n int) *recentMarkers {
	return &recentMarkers{expiry: make(map[[32]byte]int64), max: n}
}

// seen reports whether digest was added and has not expired at now.
func (r *recentMarkers) seen(digest [32]byte, now time.Time) bool {
	r.mu.Lock()
	exp, ok := r.expiry[digest]
	r.mu.Unlock()
	return ok && now.UnixNano() < exp
}

// add remembers digest until now+ttl, forgetting the oldest digest when
// full.
func (r *recentMarkers) add(digest [32]byte, now time.Time, ttl time.Duration) {
	slot := usedSlot{digest: digest, expiry: now.Add(ttl).UnixNano()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ring) < r.max {
		r.ring = append(r.ring, slot)
	} else {
		old := &r.ring[r.next]
		if r.expiry[old.digest] == old.expiry {
			delete(r.expiry, old.digest)
		}
		*old = slot
		r.next = (r.next + 1) % r.max
	}
	r.expiry[digest] = slot.expiry
}
