// Package cache keeps verified delegations: a Cache implements the
// Verify of the vc.Verifier it wraps, and serves a credential verified
// before, under the same rules, without parsing, resolving or verifying
// it again.
package cache

import (
	"context"
	"crypto/sha256"
	"errors"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// An edge sees the same
// credential on every request of a session; once it has verified, a
// repeat costs a SHA-256 of the token (and the rules) and a map lookup: nothing is parsed,
// resolved or verified again. A credential served again and again skips the
// SHA-256 too (keymemo.go).
//
// Key. SHA-256 over the trimmed credential followed by an encoding of every
// per-call rule that can change the outcome (vc.Call.AppendKey: the
// audiences, RequireAudience, the scopes and the SHA-256 of each ancestor
// credential) and the credential's length: one pass over the credential per hit, which also
// gives, at the credential's end, the credential's own SHA-256
// (Delegation.Hash), so that a miss does not hash it again. A credential
// accepted for one audience or set of scopes is therefore never served for
// another. The Verifier's own
// configuration (trust, algorithms, skew, …) is fixed, and the cache
// wraps one Verifier.
//
// Bypass. Presentations are never stored: their nonce and replay checks
// hold per use. Calls with WithPresentationNonce or RequirePresentation
// skip the cache altogether; a presentation sent without them is looked up
// (and misses), and neither its result nor its verification is shared.
// A result is not stored when some of the ancestors given (WithAncestors)
// are not on its chain (a copy of the credential itself, from a client
// that sends its whole chain, counts as on it): they are in the key but
// change nothing, so junk ancestors would give one credential any number
// of keys.
//
// Lifetime. An entry is served while the clock is before the earliest of:
// the chain's ExpiresAt (exactly, without the clock skew Verify allows), the
// cache TTL after it was stored (WithTTL, default 60s: how long
// a rotated or removed issuer key may still be honoured), and, when any
// credential of the chain has a credentialStatus that was checked, the
// status list TTL after it was stored (vc.WithStatusListTTL). The list itself
// may have been fetched up to one TTL before, so a revocation takes effect
// within two status TTLs (plus WithStatusStaleIfError, if set). Every hit
// also re-checks NotBefore and IssuedAt, with the skew, against the clock
// (which matters only if the clock steps back). Failures are
// never stored (an attacker could fill the cache with them) and a failure
// removes the entry for its key.
//
// Bursts. One verification runs per key at a time (a flight, registered
// in the key's shard): N concurrent requests with the same new token,
// good or bad, cost one verification. It runs under the context of the
// caller that started it; the others wait for it whatever their own
// context (it is bounded by the resolver's and the status fetch's
// timeouts). A caller that joined another's verification redoes its own
// when that one was a presentation, failed because its caller's context
// ended, or did not finish (it panicked). The flights are this file's own
// rather than x/sync/singleflight's: with a token never seen before, the
// edge's miss case, a flight costs one allocation where a singleflight
// call cost four (the string key, the call, the closure, the result).
//
// Bound and eviction. At most maxEntries entries and maxBytes bytes, in 16
// shards (one below 256 entries) chosen by key; each shard holds its share
// of both and evicts with CLOCK (second chance): a hit sets the entry's
// reference bit, and an insertion into a full shard sweeps the hand past
// referenced entries, clearing their bits, and drops the first
// unreferenced or expired one, as many times as it takes for the new entry
// to fit. A hit takes only a read lock.
//
// Admission. Once a shard is full, a credential is stored only the second
// time it is verified (admission.go): a flood of one-off tokens then
// displaces nothing, and costs no entry, no eviction and no GC work, where
// without it each token would push out an entry not used since the hand
// last passed it.
//
// Bytes. The count alone does not bound memory: an entry keeps its
// delegation's strings, and a credential's ids are as long as its sender
// likes (10,000 credentials of 54 KB with long ids once held 260 MiB).
// An entry is accounted as its strings (one detached string, below), its
// slice headers when they do not fit in the entry, and a fixed overhead
// for the entry, its key, its map slot and its ring slot
// (resultEntrySize). The default budget, 16 MiB, is about 1.7 KB for each
// of the edge's 10,000 entries: twice what a typical entry takes (a
// KYA-OS VC-JWT of 1.7 KB costs about 800 B of live heap), so the budget
// only bites when entries are unusually large. An entry over
// maxResultEntryBytes (16 KiB: twenty typical ones; no plausible delegation
// comes near it, a chain of ten with long ids is a few KB), or over a
// sixteenth of its shard's budget, is not stored at all: such a credential
// is verified on every use, as without the cache, which costs its sender
// about as much as the edge, and it cannot push out many ordinary entries.
//
// Results are copies: every caller gets a Delegation of its own, with its
// own slices, so no caller can change what the next one gets. The caller
// that verified gets the Delegation it verified, unless others waited for
// it, which copy it. An entry's strings are copied into one string of its
// own: a credential's decoded strings share the bytes of its whole claims
// (the VC-JWT decoder does not copy them), which an entry must not keep
// alive.

const (
	defaultResultCacheTTL   = 60 * time.Second
	defaultResultCacheBytes = 16 << 20
	maxResultEntryBytes     = 16 << 10
)

// Option configures a Cache.
type Option func(*config)

// config is what the options set.
type config struct {
	maxBytes int
	ttl      time.Duration
	observe  func(hit bool)
}

// WithMaxBytes bounds the memory the entries keep (their strings and a
// fixed overhead each), whatever their count: entries are evicted to stay
// within both bounds. Default 16 MiB, about twice what 10,000 typical
// entries take; n <= 0 keeps the default. A delegation larger than 16 KiB,
// or than a sixteenth of its shard's share of n (n/16 from 256 entries on,
// n below), is not cached: it is verified on every use.
func WithMaxBytes(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxBytes = n
		}
	}
}

// WithTTL bounds how long a verified delegation is served, whatever its
// expiry, so that a rotated issuer key (or a changed DID document) stops
// being honoured within d. Default 60s; d <= 0 keeps the default.
func WithTTL(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.ttl = d
		}
	}
}

// WithObserver calls fn once per Verify that consulted the cache, with
// whether it was served from it (for hit/miss metrics). fn runs on the
// request path, concurrently: it must be quick and safe for concurrent
// use.
func WithObserver(fn func(hit bool)) Option {
	return func(c *config) { c.observe = fn }
}

// Cache is a vc.Verifier with its verified delegations kept: its Verify
// is the Verifier's, and a credential verified before under the same rules
// is served from the cache until the earliest of the chain's ExpiresAt,
// the cache TTL (WithTTL) and, when the chain has a credentialStatus, the
// status list TTL (vc.WithStatusListTTL); so a revoked credential, or one
// whose issuer rotated its key, may still be accepted for that long.
// Presentations are never cached. Failures are not cached; concurrent
// calls with the same token share one verification. Eviction is CLOCK
// (second chance) in 16 shards. The entries' memory is bounded too
// (WithMaxBytes). Each call gets its own copy of the Delegation. Safe for
// concurrent use.
type Cache struct {
	v *vc.Verifier
	// skew and statusTTL are the Verifier's, fixed.
	skew, statusTTL time.Duration
	ttl             time.Duration
	observe         func(hit bool)
	shards          []resultShard
	mask            uint8
	// recent spares a credential served again its key's SHA-256
	// (keymemo.go).
	recent keyMemo
	// door decides which credentials a full shard stores (admission.go).
	door doorkeeper
}

// resultShard is one CLOCK-evicted part of the cache.
type resultShard struct {
	mu      sync.RWMutex
	entries map[resultKey]*resultEntry
	// ring holds the entries in CLOCK order (nil where one was removed);
	// it grows to capacity and then entries are replaced in place.
	ring     []*resultEntry
	free     []int32 // indexes of nil slots in ring
	hand     int
	capacity int
	// bytes is what the entries take (resultEntrySize), at most maxBytes;
	// no entry over maxEntryBytes is stored.
	bytes, maxBytes, maxEntryBytes int

	// flights are the verifications in progress, by key.
	flightMu sync.Mutex
	flights  map[resultKey]*resultFlight

	_ [64]byte // keep shards' locks off each other's cache lines
}

// resultFlight is one verification in progress; the callers that join it
// wait on done and then read res, which the leader sets before done.
type resultFlight struct {
	done    sync.WaitGroup
	waiters int // joined callers; under the shard's flightMu
	res     flightResult
}

// resultEntry is one cached verification; immutable once stored but for
// ref.
type resultEntry struct {
	key resultKey
	d   vc.Delegation // private: callers get copies
	// strs holds d's slices when they fit (a few scopes, an audience and
	// a credential: the usual), so that an entry is one allocation besides
	// its strings.
	strs [4]string
	// until is when the entry stops being served (unix ns); notBefore is
	// the later of the delegation's NotBefore and IssuedAt, less the skew
	// (unix ns), math.MinInt64 when it has neither.
	until, notBefore int64
	slot             int32
	size             int32 // resultEntrySize, accounted in the shard's bytes
	ref              atomic.Bool
}

// resultEntryOverhead is what an entry takes besides its strings and their
// headers: the entry, the map's key and pointer, and the ring's pointer.
const resultEntryOverhead = int(unsafe.Sizeof(resultEntry{})+unsafe.Sizeof(resultKey{})) + 2*int(unsafe.Sizeof(uintptr(0)))

// resultEntrySize is what an entry accounts for: the overhead, the
// detached string of strBytes, and the headers of its n slice elements
// when they do not fit in the entry's strs.
func resultEntrySize(strBytes, n int) int {
	size := resultEntryOverhead + strBytes
	if n > len(resultEntry{}.strs) {
		size += n * int(unsafe.Sizeof(""))
	}
	return size
}

// New returns v with a cache of at most maxEntries verified delegations
// (at least one).
func New(v *vc.Verifier, maxEntries int, opts ...Option) *Cache {
	cfg := config{ttl: defaultResultCacheTTL, maxBytes: defaultResultCacheBytes}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	maxEntries = min(max(maxEntries, 1), 1<<30) // slots are int32
	n := 1
	if maxEntries >= 256 {
		n = 16
	}
	rc := &Cache{
		v:         v,
		skew:      v.ClockSkew(),
		statusTTL: v.StatusListTTL(),
		ttl:       cfg.ttl,
		observe:   cfg.observe,
		shards:    make([]resultShard, n),
		mask:      uint8(n - 1),
		recent:    keyMemo{seed: maphash.MakeSeed()},
		door:      newDoorkeeper(maxEntries),
	}
	for i := range rc.shards {
		s := &rc.shards[i]
		s.capacity = maxEntries / n
		if i < maxEntries%n {
			s.capacity++
		}
		s.maxBytes = cfg.maxBytes / n
		if i < cfg.maxBytes%n {
			s.maxBytes++
		}
		s.maxEntryBytes = min(maxResultEntryBytes, s.maxBytes/16)
		s.entries = make(map[resultKey]*resultEntry, min(s.capacity, 1024))
	}
	return rc
}

func (rc *Cache) shard(k *resultKey) *resultShard { return &rc.shards[k[0]&rc.mask] }

// Len is the number of entries held, including expired ones not yet
// evicted.
func (rc *Cache) Len() int {
	n := 0
	for i := range rc.shards {
		s := &rc.shards[i]
		s.mu.RLock()
		n += len(s.entries)
		s.mu.RUnlock()
	}
	return n
}

// Bytes is what the entries take, as accounted against the budget.
func (rc *Cache) Bytes() int {
	n := 0
	for i := range rc.shards {
		s := &rc.shards[i]
		s.mu.RLock()
		n += s.bytes
		s.mu.RUnlock()
	}
	return n
}

// get returns the entry for k if it may be served at now.
func (rc *Cache) get(k *resultKey, now time.Time) *resultEntry {
	s := rc.shard(k)
	s.mu.RLock()
	e := s.entries[*k]
	s.mu.RUnlock()
	if e == nil {
		return nil
	}
	t := now.UnixNano()
	if t >= e.until || t < e.notBefore {
		return nil
	}
	if !e.ref.Load() {
		e.ref.Store(true)
	}
	return e
}

// put stores d for k, verified at now; statusChecked says a
// credentialStatus of the chain was checked, capping the entry at the
// status list TTL.
func (rc *Cache) put(k *resultKey, d *vc.Delegation, now time.Time, statusChecked bool) {
	until := now.Add(rc.ttl)
	if statusChecked {
		until = earliest(until, now.Add(rc.statusTTL))
	}
	until = earliest(until, d.ExpiresAt)
	if !until.After(now) {
		return
	}
	e := &resultEntry{key: *k, until: until.UnixNano(), notBefore: math.MinInt64}
	n := d.Strings()
	var buf []string
	if n <= len(e.strs) {
		buf = e.strs[:0:n]
	} else {
		buf = make([]string, 0, n)
	}
	d.CopyTo(&e.d, buf)
	size := resultEntrySize(detachStrings(&e.d), n)
	if start := latest(d.NotBefore, d.IssuedAt); !start.IsZero() {
		e.notBefore = start.Add(-rc.skew).UnixNano()
	}

	s := rc.shard(k)
	if size > s.maxEntryBytes {
		return // outsized: verified on every use rather than crowd out others
	}
	e.size = int32(size)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.entries[*k]; old != nil {
		s.drop(old)
	}
	// Evict until a slot is free and the entry fits; there is an entry to
	// evict whenever either is not the case, as size <= s.maxBytes.
	for (len(s.free) == 0 && len(s.ring) >= s.capacity) || s.bytes+size > s.maxBytes {
		s.evict(now.UnixNano())
	}
	if len(s.free) > 0 {
		e.slot = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
	} else {
		e.slot = int32(len(s.ring))
		s.ring = append(s.ring, nil)
	}
	s.ring[e.slot] = e
	s.entries[*k] = e
	s.bytes += size
}

// admits reports whether a credential verified under k is to be stored:
// always while its shard has room for another entry or holds an expired
// entry for k (replacing it evicts nothing), and once the shard is full
// only when k was verified before (admission.go).
func (rc *Cache) admits(k *resultKey) bool {
	s := rc.shard(k)
	s.mu.RLock()
	_, stored := s.entries[*k]
	full := len(s.free) == 0 && len(s.ring) >= s.capacity || s.bytes > s.maxBytes-s.maxEntryBytes
	s.mu.RUnlock()
	return stored || !full || rc.door.seenBefore(k)
}

// evict drops the first entry, from the hand on, that has expired or has
// not been used since the hand last passed it. The shard holds at least
// one entry; s.mu is held. It stops within two turns: the first clears
// every reference bit.
func (s *resultShard) evict(now int64) {
	for {
		i := s.hand
		s.hand++
		if s.hand == len(s.ring) {
			s.hand = 0
		}
		e := s.ring[i]
		if e == nil {
			continue
		}
		if now < e.until && e.ref.Swap(false) {
			continue
		}
		s.drop(e)
		return
	}
}

// drop removes the stored entry e, freeing its slot and its bytes. s.mu is
// held.
func (s *resultShard) drop(e *resultEntry) {
	delete(s.entries, e.key)
	s.ring[e.slot] = nil
	s.free = append(s.free, e.slot)
	s.bytes -= int(e.size)
}

// remove drops the entry for k, if any. A flood of bad tokens finds none
// and takes only the read lock.
func (rc *Cache) remove(k *resultKey) {
	s := rc.shard(k)
	s.mu.RLock()
	e := s.entries[*k]
	s.mu.RUnlock()
	if e == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[*k]; e != nil {
		s.drop(e)
	}
}

// flightResult is what one verification hands to every caller that waited
// for it.
type flightResult struct {
	d         *vc.Delegation // read only
	err       error
	presented bool
	// unfinished: the leader never set the result (it panicked).
	unfinished bool
	// cancelled: the leader's context had ended when its verification
	// failed. The error need not say so (a DID fetch cut short is
	// ErrFetch), and it says nothing about the credential.
	cancelled bool
}

// join registers the caller for the verification of k: it leads a new
// flight (leader true) or waits for the one in progress.
func (s *resultShard) join(k *resultKey) (f *resultFlight, leader bool) {
	s.flightMu.Lock()
	defer s.flightMu.Unlock()
	if f := s.flights[*k]; f != nil {
		f.waiters++
		return f, false
	}
	if s.flights == nil {
		s.flights = make(map[resultKey]*resultFlight)
	}
	f = new(resultFlight)
	f.done.Add(1)
	s.flights[*k] = f
	return f, true
}

// land ends the flight for k with res and wakes its waiters; it returns
// how many there were. No caller joins a flight once it has landed.
func (s *resultShard) land(k *resultKey, f *resultFlight, res flightResult) int {
	s.flightMu.Lock()
	delete(s.flights, *k)
	n := f.waiters
	s.flightMu.Unlock()
	f.res = res
	f.done.Done()
	return n
}

// Verify is vc.Verifier.Verify, served from the cache when it can be.
func (rc *Cache) Verify(ctx context.Context, raw []byte, opts ...vc.CheckOption) (*vc.Delegation, error) {
	call, err := rc.v.Prepare(raw, opts)
	if err != nil {
		return nil, err
	}
	// The release is deferred here, apart from verify's returns: with
	// verify's own defer it would take the slower, runtime path for
	// deferred calls on every hit.
	defer call.Release()
	return rc.verify(ctx, call)
}

// verify is Verify of a prepared call. The credential's SHA-256 is taken
// only when it is verified: a hit needs only the key.
func (rc *Cache) verify(ctx context.Context, call vc.Call) (*vc.Delegation, error) {
	var buf [maxKeyOnStack]byte
	in, ok := call.AppendKey(buf[:0])
	if !ok {
		return call.Verify(ctx)
	}
	raw := call.Credential()
	key, credSum, sum, known := rc.recent.key(in, len(raw))
	if e := rc.get(&key, rc.v.Now()); e != nil {
		if !known {
			rc.recent.served(sum, in, &key)
		}
		if rc.observe != nil {
			rc.observe(true)
		}
		return e.d.Clone(), nil
	}
	if rc.observe != nil {
		rc.observe(false)
	}

	s := rc.shard(&key)
	f, leader := s.join(&key)
	if !leader {
		f.done.Wait()
		res := &f.res
		switch {
		case res.presented, res.unfinished, res.err != nil && ctx.Err() == nil && (res.cancelled || isContextError(res.err)):
			// A presentation is checked per use; and the leader's context
			// ending, or its panic, says nothing about this credential.
			return call.Verify(ctx)
		case res.err != nil:
			return nil, res.err
		}
		return res.d.Clone(), nil
	}

	landed := false
	defer func() {
		if !landed { // the verification panicked: let the waiters verify on their own
			s.land(&key, f, flightResult{unfinished: true})
		}
	}()
	// Another flight may have stored it between our lookup and now.
	if e := rc.get(&key, rc.v.Now()); e != nil {
		landed = true
		s.land(&key, f, flightResult{d: &e.d})
		return e.d.Clone(), nil
	}
	if known { // the key came from the memo, without the credential's sum
		credSum = sha256.Sum256(raw)
	}
	d, out, err := call.VerifySum(ctx, &credSum)
	if err != nil {
		rc.remove(&key)
		landed = true
		s.land(&key, f, flightResult{err: err, cancelled: ctx.Err() != nil})
		return nil, err
	}
	if !d.Presented && !out.UnusedAncestors && rc.admits(&key) {
		rc.put(&key, d, rc.v.Now(), out.StatusChecked)
	}
	landed = true
	if s.land(&key, f, flightResult{d: d, presented: d.Presented}) > 0 && !d.Presented {
		// The waiters copy d: the caller must not be able to change it
		// under them.
		return d.Clone(), nil
	}
	return d, nil
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// earliest and latest of two times, a zero time counting as none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
