package ed25519v

import (
	"crypto/ed25519"
	"sync"
)

// A table costs about ten verifications to build and 84 KiB to keep, so a
// Cache builds one only for a key that has verified admitAfter times since
// it last forgot candidates, and pays for builds from plain verifications:
// each adds a credit, a build takes buildCost. So whatever keys come, the
// builds add at most about a tenth to the work of the verifications that
// paid for them, and a key that verifies often (a trusted issuer's, an
// agent's) gets its table after a handful of calls.
const (
	admitAfter = 4
	buildCost  = 128
	maxCredit  = 4 * buildCost // a few builds at start and after a lull
	// DefaultKeys bounds the shared Cache: 64 tables, 5.2 MiB.
	DefaultKeys = 64
)

// Cache verifies Ed25519 signatures (see the package doc) and keeps tables
// for at most a fixed number of keys, evicting with CLOCK. It is safe for
// concurrent use.
type Cache struct {
	mu      sync.Mutex
	tables  map[[ed25519.PublicKeySize]byte]*slot
	ring    []*slot // CLOCK order; len(ring) == len(tables)
	hand    int
	max     int
	seen    map[[ed25519.PublicKeySize]byte]uint8 // successes of keys without a table
	credits int
	builds  uint64
}

type slot struct {
	id  [ed25519.PublicKeySize]byte
	key *PublicKey
	ref bool
}

// NewCache returns a Cache holding at most maxKeys tables (at least one).
func NewCache(maxKeys int) *Cache {
	maxKeys = max(maxKeys, 1)
	return &Cache{
		tables:  make(map[[ed25519.PublicKeySize]byte]*slot, maxKeys),
		max:     maxKeys,
		seen:    make(map[[ed25519.PublicKeySize]byte]uint8),
		credits: maxCredit,
	}
}

var shared = NewCache(DefaultKeys)

// Verify is crypto/ed25519.Verify through a process-wide Cache of
// DefaultKeys tables, except that a public key of the wrong length is
// refused instead of panicking.
func Verify(pub ed25519.PublicKey, msg, sig []byte) bool { return shared.Verify(pub, msg, sig) }

// SmallOrder reports, through the shared Cache, whether pub is not a usable
// Ed25519 key for a signature that must bind its signer: not 32 bytes, not
// a point as crypto/ed25519 decodes one, or a point of small order.
func SmallOrder(pub ed25519.PublicKey) bool { return shared.SmallOrder(pub) }

// SmallOrder is the package's SmallOrder on c: a key with a table answers
// from it, without decoding the point again (a square root, a tenth of a
// verification).
func (c *Cache) SmallOrder(pub ed25519.PublicKey) bool {
	if len(pub) != ed25519.PublicKeySize {
		return true
	}
	c.mu.Lock()
	s := c.tables[[ed25519.PublicKeySize]byte(pub)]
	c.mu.Unlock()
	if s != nil {
		return s.key.smallOrder
	}
	return smallOrderOf(pub)
}

// Verify reports whether sig is pub's valid signature of msg, with the
// result of crypto/ed25519.Verify; a pub of the wrong length is refused.
func (c *Cache) Verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize {
		return false
	}
	id := [ed25519.PublicKeySize]byte(pub)
	c.mu.Lock()
	if s := c.tables[id]; s != nil {
		s.ref = true
		k := s.key
		c.mu.Unlock()
		return k.Verify(msg, sig)
	}
	c.credits = min(c.credits+1, maxCredit)
	c.mu.Unlock()
	if !ed25519.Verify(pub, msg, sig) {
		return false // only keys that sign count towards a table
	}
	if c.admit(id) {
		if k, err := NewPublicKey(pub); err == nil {
			c.insert(id, k)
		}
	}
	return true
}

// admit counts a success of id and reports whether its table should be
// built now (and takes the credits for it).
func (c *Cache) admit(id [ed25519.PublicKeySize]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.seen[id] + 1
	if n >= admitAfter && c.credits >= buildCost {
		delete(c.seen, id)
		c.credits -= buildCost
		c.builds++
		return true
	}
	if _, ok := c.seen[id]; !ok && len(c.seen) >= 8*c.max {
		clear(c.seen) // bounded: forget the candidates, keep the tables
	}
	c.seen[id] = min(n, admitAfter)
	return false
}

// insert keeps k's table, evicting with CLOCK when full.
func (c *Cache) insert(id [ed25519.PublicKeySize]byte, k *PublicKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tables[id] != nil {
		return // built concurrently
	}
	s := &slot{id: id, key: k}
	if len(c.ring) < c.max {
		c.ring = append(c.ring, s)
		c.tables[id] = s
		return
	}
	for c.ring[c.hand].ref {
		c.ring[c.hand].ref = false
		c.hand = (c.hand + 1) % len(c.ring)
	}
	delete(c.tables, c.ring[c.hand].id)
	c.ring[c.hand] = s
	c.tables[id] = s
	c.hand = (c.hand + 1) % len(c.ring)
}

// Stats reports the keys with a table and the tables built so far.
func (c *Cache) Stats() (keys int, builds uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.tables), c.builds
}
