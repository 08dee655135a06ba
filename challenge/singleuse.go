package challenge

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// SingleUse is implemented by a NonceStore that keeps single-use markers
// apart from its records: the SHA-256 digest of something that may be
// used only once (a KYA-OS request proof's did and nonce), remembered for
// a time to live. A marker is all the store keeps, so it costs a fixed
// few dozen bytes instead of a Record, and one round trip to Redis with
// no JSON.
//
// A store that wraps another (to measure it, say) may implement UseOnce
// and fail with an error wrapping errors.ErrUnsupported when what it
// wraps has none: the caller then falls back to Put.
type SingleUse interface {
	// UseOnce records digest for ttl unless a live marker of it is held:
	// it fails with ErrNonceExists then, and with an error wrapping
	// ErrStoreUnavailable (ErrStoreFull for a full memory store) when the
	// store cannot be used. Of concurrent calls for one digest, across
	// every process sharing the store, at most one succeeds.
	UseOnce(ctx context.Context, digest [32]byte, ttl time.Duration) error
}

// SeenLocally is implemented by a SingleUse store that remembers, in this
// process, markers it has confirmed. Seen reports whether digest is one,
// still live, without a round trip: a caller can then refuse a replay
// before spending anything on it. false means only "not known here";
// UseOnce remains the answer.
type SeenLocally interface {
	Seen(digest [32]byte) bool
}

// usedSet is the memory store's SingleUse: markers by digest, with their
// expiries as integers, in structures without pointers. The garbage
// collector does not scan those, so a full store (a million markers and
// more) does not slow down every collection in the process, as a map of
// pointers to records would. Markers are expired in the order they were
// made, which is expiry order when every ttl is the same (the proof
// gate's is fixed); with mixed ttls, a marker that outlived its ttl
// behind a longer-lived one is still freed at once when its digest
// comes again, and counts against the bound until the ones before it go.
// Never is a live marker dropped: a full set fails closed.
//
// Markers are counted in two partitions (Unbound), each under the bound:
// one digest map, so a marker in either refuses the digest in both.
type usedSet struct {
	mu     sync.Mutex
	closed bool
	max    int
	// expiry holds each marker's expiry (Unix nanoseconds) by digest.
	expiry map[[32]byte]int64
	// rings hold the markers of each partition (bound, unbound) in the
	// order they were made.
	rings      [2]usedRing
	initialCap int
}

// usedRing is a ring of markers in the order they were made: slots
// order[(head+i)%len(order)] for i < n. A slot whose expiry differs from
// expiry[digest] is stale (its digest was used again after it expired)
// and is dropped without touching the map.
type usedRing struct {
	order   []usedSlot
	head, n int
}

type usedSlot struct {
	digest [32]byte
	expiry int64
}

// usedRingStart is the ring's first size: it doubles as markers arrive,
// up to the store's bound, so an idle store costs little.
const usedRingStart = 1024

func newUsedSet(bound int) *usedSet {
	return &usedSet{max: bound, expiry: make(map[[32]byte]int64), initialCap: min(usedRingStart, bound)}
}

// use is UseOnce at now, in partition part (0 bound, 1 unbound).
func (s *usedSet) use(digest [32]byte, now time.Time, ttl time.Duration, part int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%w: memory store closed", ErrStoreUnavailable)
	}
	t := now.UnixNano()
	if exp, ok := s.expiry[digest]; ok && t < exp {
		return ErrNonceExists
	}
	r := &s.rings[part]
	if r.n >= s.max {
		s.expire(r, t)
		if r.n >= s.max {
			return ErrStoreFull
		}
	}
	exp := now.Add(ttl).UnixNano()
	s.expiry[digest] = exp
	s.push(r, usedSlot{digest: digest, expiry: exp})
	return nil
}

// push appends a slot to ring r, growing it (twice as large, at most
// max) when full. r.n < s.max.
func (s *usedSet) push(r *usedRing, slot usedSlot) {
	if r.n == len(r.order) {
		grown := make([]usedSlot, max(min(max(2*len(r.order), s.initialCap), s.max), r.n+1))
		for i := range r.n {
			grown[i] = r.order[(r.head+i)%len(r.order)]
		}
		r.order, r.head = grown, 0
	}
	r.order[(r.head+r.n)%len(r.order)] = slot
	r.n++
}

// expire drops the markers of ring r made first while they have expired
// at t (Unix nanoseconds). s.mu is held.
func (s *usedSet) expire(r *usedRing, t int64) {
	for r.n > 0 {
		slot := &r.order[r.head]
		if t < slot.expiry {
			return
		}
		if s.expiry[slot.digest] == slot.expiry {
			delete(s.expiry, slot.digest)
		}
		r.head = (r.head + 1) % len(r.order)
		r.n--
	}
}

// sweep drops expired markers (the janitor).
func (s *usedSet) sweep(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		for i := range s.rings {
			s.expire(&s.rings[i], now.UnixNano())
		}
	}
}

// setMax changes the bound. A smaller bound than the markers held drops
// none: new ones are refused until enough expire.
func (s *usedSet) setMax(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max = n
	s.initialCap = min(usedRingStart, n)
}

// close drops every marker; later uses fail.
func (s *usedSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.expiry, s.rings = nil, [2]usedRing{}
}

// len is the number of markers held, expired or not.
func (s *usedSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.expiry)
}

// unboundKey marks a context whose markers no verified credential vouches
// for (Unbound).
type unboundKey struct{}

// Unbound returns ctx marked so that the memory store counts the markers
// UseOnce makes under it apart, under a bound of their own: markers that
// anyone can make (a request proof by an agent no verified delegation
// names: self-made keys on an anonymous tool) then fill only their own
// partition, and a full one refuses only them, never the proofs of
// credentialed callers. A marker in either partition still refuses its
// digest in both. It is carried by the context so that the stores which
// wrap the memory store (to measure it, to pool it) pass it unchanged;
// Redis has no bound of its own and ignores it.
func Unbound(ctx context.Context) context.Context {
	return context.WithValue(ctx, unboundKey{}, true)
}

func partitionOf(ctx context.Context) int {
	if v, _ := ctx.Value(unboundKey{}).(bool); v {
		return 1
	}
	return 0
}

// UseOnce implements SingleUse. Markers are counted apart from records and
// bindings, under the same bound (MaxEntries live markers in each
// partition, Unbound): when that many live markers of ctx's partition are
// held, UseOnce fails with ErrStoreFull.
func (m *MemoryStore) UseOnce(ctx context.Context, digest [32]byte, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("challenge: memory store: ttl must be positive")
	}
	if ctx.Err() != nil {
		return requestEnded(ctx)
	}
	return m.used.use(digest, m.now(), ttl, partitionOf(ctx))
}

// SingleUses returns the number of single-use markers held, expired or
// not.
func (m *MemoryStore) SingleUses() int { return m.used.len() }

var _ SingleUse = (*MemoryStore)(nil)
