package ed25519v

import (
	"crypto/ed25519"
	"sync"
	"testing"
	"unsafe"
)

type signer struct {
	pub      ed25519.PublicKey
	msg, sig []byte
}

func newSigner(i int) signer {
	var seed [32]byte
	seed[0], seed[1] = byte(i), byte(i>>8)
	priv := ed25519.NewKeyFromSeed(seed[:])
	msg := []byte{byte(i), 'm'}
	return signer{priv.Public().(ed25519.PublicKey), msg, ed25519.Sign(priv, msg)}
}

// A key earns its table after admitAfter successful verifications, not
// before, and failures do not count; afterwards it still refuses forgeries.
func TestCacheAdmitsAKeyThatSigns(t *testing.T) {
	c := NewCache(4)
	s := newSigner(1)
	bad := append([]byte(nil), s.sig...)
	bad[0] ^= 1
	for range 10 {
		if c.Verify(s.pub, s.msg, bad) {
			t.Fatal("forgery accepted")
		}
	}
	for i := range admitAfter {
		if keys, _ := c.Stats(); keys != 0 {
			t.Fatalf("a table after %d successes", i)
		}
		if !c.Verify(s.pub, s.msg, s.sig) {
			t.Fatal("refused")
		}
	}
	if keys, builds := c.Stats(); keys != 1 || builds != 1 {
		t.Fatalf("keys %d, builds %d after %d successes", keys, builds, admitAfter)
	}
	if c.Verify(s.pub, s.msg, bad) || !c.Verify(s.pub, s.msg, s.sig) {
		t.Fatal("the table's verdicts are wrong")
	}
}

// However many keys sign, at most maxKeys tables are kept, and builds are
// paid for: no more than the starting credit plus one per buildCost plain
// verifications.
func TestCacheBoundsTablesAndBuilds(t *testing.T) {
	const maxKeys = 3
	c := NewCache(maxKeys)
	plain := 0
	for i := range 40 {
		s := newSigner(i)
		for range admitAfter {
			if keys, _ := c.Stats(); keys > maxKeys {
				t.Fatalf("%d tables", keys)
			}
			c.mu.Lock()
			hasTable := c.tables[[32]byte(s.pub)] != nil
			c.mu.Unlock()
			if !hasTable {
				plain++
			}
			if !c.Verify(s.pub, s.msg, s.sig) {
				t.Fatal("refused")
			}
		}
	}
	keys, builds := c.Stats()
	if keys != maxKeys {
		t.Fatalf("%d tables, want %d", keys, maxKeys)
	}
	if limit := uint64(maxCredit/buildCost + plain/buildCost); builds > limit || builds == 0 {
		t.Fatalf("%d builds for %d plain verifications, limit %d", builds, plain, limit)
	}
}

// A key in use keeps its table while others come and go (CLOCK).
func TestCacheKeepsAHotKey(t *testing.T) {
	c := NewCache(2)
	hot := newSigner(1000)
	for range admitAfter {
		c.Verify(hot.pub, hot.msg, hot.sig)
	}
	for i := range 30 {
		s := newSigner(i)
		c.mu.Lock()
		c.credits = buildCost // every key gets its table: eviction each time
		c.mu.Unlock()
		for range admitAfter {
			c.Verify(s.pub, s.msg, s.sig)
			c.Verify(hot.pub, hot.msg, hot.sig)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tables[[32]byte(hot.pub)] == nil {
		t.Fatal("the hot key lost its table")
	}
	if c.builds != 31 {
		t.Fatalf("%d builds, want one per key", c.builds)
	}
}

// The shared cache's tables stay within what DefaultKeys promises.
func TestTableMemory(t *testing.T) {
	if got := unsafe.Sizeof(combTable{}); got != tableBytes {
		t.Fatalf("a table takes %d bytes, tableBytes says %d", got, tableBytes)
	}
	if DefaultKeys*tableBytes > 5.5*(1<<20) {
		t.Fatalf("the shared cache may hold %d bytes of tables", DefaultKeys*tableBytes)
	}
}

// Keys of the wrong length are refused (crypto/ed25519 panics).
func TestCacheWrongKeyLength(t *testing.T) {
	s := newSigner(1)
	for _, pub := range [][]byte{nil, s.pub[:31], append(append([]byte(nil), s.pub...), 0)} {
		if Verify(pub, s.msg, s.sig) {
			t.Fatalf("key of %d bytes accepted", len(pub))
		}
	}
}

// Concurrent verifications of a few keys (run with -race): every verdict
// is right while tables are built and evicted.
func TestCacheConcurrent(t *testing.T) {
	c := NewCache(2)
	signers := []signer{newSigner(1), newSigner(2), newSigner(3)}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 40 {
				s := signers[(g+i)%len(signers)]
				if !c.Verify(s.pub, s.msg, s.sig) || c.Verify(s.pub, s.msg[:1], s.sig) {
					t.Error("wrong verdict")
					return
				}
			}
		})
	}
	wg.Wait()
}

// SmallOrder: every torsion encoding (canonical or not) and every
// non-point is refused, a key from a seed is not; a key with a table
// answers the same from it.
func TestSmallOrder(t *testing.T) {
	c := NewCache(4)
	check := func(pub []byte, want bool) {
		t.Helper()
		if got := c.SmallOrder(pub); got != want {
			t.Fatalf("SmallOrder(%x) = %v, want %v", pub, got, want)
		}
	}
	for _, e := range torsion(t) {
		check(e, true)
	}
	check([]byte{2, 31: 0}, true) // y = 2: not on the curve
	check(make([]byte, 31), true)
	s := newSigner(7)
	check(s.pub, false)
	for range admitAfter {
		c.Verify(s.pub, s.msg, s.sig)
	}
	if keys, _ := c.Stats(); keys != 1 {
		t.Fatal("no table")
	}
	check(s.pub, false)
	// A small-order key with a table: under the identity, R = identity and
	// S = 0 verify for any message.
	id := []byte{1, 31: 0}
	sig := append(append([]byte(nil), id...), make([]byte, 32)...)
	for i := range admitAfter {
		if !c.Verify(id, []byte{byte(i)}, sig) {
			t.Fatal("crypto/ed25519 accepts R = identity, S = 0 under the identity key")
		}
	}
	if keys, _ := c.Stats(); keys != 2 {
		t.Fatal("the identity key has no table")
	}
	check(id, true)
}
