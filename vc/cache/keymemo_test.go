package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"hash/maphash"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

func TestEqualConstantTime(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 511, 512, 513, 1024, 1900, 4096} {
		a := bytes.Repeat([]byte{0x5a}, n)
		if !equalConstantTime(a, bytes.Clone(a)) {
			t.Errorf("len %d: equal inputs differ", n)
		}
		if n > 0 && equalConstantTime(a, a[:n-1]) {
			t.Errorf("len %d: a shorter input is equal", n)
		}
		for _, i := range []int{0, n / 2, n - 1, 7, 8, 511, 512, 513} {
			if i < 0 || i >= n {
				continue
			}
			b := bytes.Clone(a)
			b[i] ^= 0x80
			if equalConstantTime(a, b) {
				t.Errorf("len %d: a difference at %d not seen", n, i)
			}
		}
	}
}

// A slot serves a key only for exactly its input: a slot holding another
// input under the same hash (which the seed makes as good as impossible
// to arrange) yields the input's own SHA-256.
func TestKeyMemoExactInput(t *testing.T) {
	m := keyMemo{seed: maphash.MakeSeed()}
	a := bytes.Repeat([]byte("a"), 1900)
	b := bytes.Repeat([]byte("a"), 1900)
	b[1000] = 'b'
	ka, _, sumA, known := m.key(a, len(a))
	if known || ka != sha256.Sum256(a) {
		t.Fatalf("first key of a: known %v", known)
	}
	m.served(sumA, a, &ka)
	if _, _, _, known := m.key(a, len(a)); known {
		t.Fatal("a known after one serve; it takes two")
	}
	m.served(sumA, a, &ka)
	if k, _, _, known := m.key(a, len(a)); !known || k != ka {
		t.Fatalf("a after two serves: known %v", known)
	}
	// b forged into a's slot under b's own hash.
	_, _, sumB, _ := m.key(b, len(b))
	m.slots[sumB%keyMemoSlots].known.Store(&knownKey{sum: sumB, in: a, key: ka})
	if k, _, _, known := m.key(b, len(b)); known || k != sha256.Sum256(b) {
		t.Errorf("b served a's key from a slot holding a (known %v)", known)
	}
}

// A credential verified once is served from the cache, from the third
// use on without hashing its key again, with the same result; its
// verification under other rules is another key.
func TestResultCacheRecentKeys(t *testing.T) {
	f := newFixture(t)
	raw := issue(t, f.ed, f.vc11Claims(f.ed))
	res := didresolver.NewCache(f.res, didresolver.WithCacheClock(func() time.Time { return fixedNow }))
	v := New(vc.NewVerifier(res, vc.WithClock(func() time.Time { return fixedNow })), 100)
	ctx := context.Background()
	first, err := v.Verify(ctx, raw, vc.ForAudience(serverDID))
	if err != nil {
		t.Fatal(err)
	}
	in := keyInput(t, v, raw, vc.ForAudience(serverDID))
	for i := range 4 {
		d, err := v.Verify(ctx, raw, vc.ForAudience(serverDID))
		if err != nil || d.Hash != first.Hash || d.DelegationID != first.DelegationID {
			t.Fatalf("use %d: %v", i+2, err)
		}
	}
	if _, _, _, known := v.recent.key(in, len(raw)); !known {
		t.Error("a credential served four times is not known")
	}
	if _, err := v.Verify(ctx, raw, vc.ForAudience("did:web:other.example")); err == nil {
		t.Error("a credential known under one audience verified for another")
	}
}

// A key in use keeps its slot against another input coming to it: the
// newcomer takes it only once the first went unused.
func TestKeyMemoSecondChance(t *testing.T) {
	m := keyMemo{seed: maphash.MakeSeed()}
	a, b := []byte("input a"), []byte("input b")
	ka, _, sumA, _ := m.key(a, len(a))
	m.served(sumA, a, &ka)
	m.served(sumA, a, &ka)
	kb := resultKey(sha256.Sum256(b))
	// b arrives in a's slot (forced: same slot, its own hash).
	sumB := sumA + keyMemoSlots
	if _, _, _, known := m.key(a, len(a)); !known { // a in use
		t.Fatal("a not known")
	}
	m.served(sumB, b, &kb)
	m.served(sumB, b, &kb) // second time in a row, but a was used: kept
	if _, _, _, known := m.key(a, len(a)); !known {
		t.Fatal("a, in use, lost its slot")
	}
	m.served(sumB, b, &kb) // a's use was counted: another chance
	if k := m.slots[sumA%keyMemoSlots].known.Load(); k == nil || !bytes.Equal(k.in, a) {
		t.Fatal("a lost its slot after one use")
	}
	m.served(sumB, b, &kb) // a unused since: b takes the slot
	if k := m.slots[sumA%keyMemoSlots].known.Load(); k == nil || !bytes.Equal(k.in, b) {
		t.Error("b did not take the slot of an unused a")
	}
}

// TestKeyMemoBound: an input longer than maxKeyOnStack is never
// remembered, so the slots keep at most keyMemoSlots·maxKeyOnStack bytes.
func TestKeyMemoBound(t *testing.T) {
	m := keyMemo{seed: maphash.MakeSeed()}
	for _, n := range []int{maxKeyOnStack, maxKeyOnStack + 1, 64 << 10} {
		in := bytes.Repeat([]byte{'a'}, n)
		k, _, sum, _ := m.key(in, len(in))
		m.served(sum, in, &k)
		m.served(sum, in, &k)
		_, _, _, known := m.key(in, len(in))
		if want := n <= maxKeyOnStack; known != want {
			t.Errorf("input of %d bytes: remembered %v, want %v", n, known, want)
		}
	}
}

// keySums is one pass for two sums: SHA-256 of the whole input and of its
// start, at every split, around SHA-256's block boundaries too.
func TestKeySums(t *testing.T) {
	in := make([]byte, 2100)
	for i := range in {
		in[i] = byte(i * 7)
	}
	for _, size := range []int{0, 1, 55, 56, 64, 65, 200, 2100} {
		for _, n := range []int{0, 1, 55, 56, 63, 64, 65, 119, 120, 128, size / 2, size - 1, size} {
			if n < 0 || n > size {
				continue
			}
			key, cred := keySums(in[:size], n)
			if key != sha256.Sum256(in[:size]) || cred != sha256.Sum256(in[:n]) {
				t.Errorf("keySums of %d bytes split at %d", size, n)
			}
		}
	}
}

// vc.Delegation.Hash is the credential's SHA-256 on every path through the
// cache: a miss (the sum taken with the key), a hit, and a miss whose key
// the memo knew (the entry expired), where no sum came with the key.
func TestResultCacheHashOnEveryPath(t *testing.T) {
	f := newFixture(t)
	raw := issue(t, f.ed, f.vc11Claims(f.ed))
	want := sha256.Sum256(raw)
	now := fixedNow
	clock := func() time.Time { return now }
	res := didresolver.NewCache(f.res, didresolver.WithCacheClock(clock))
	var hits, misses int
	v := New(vc.NewVerifier(res, vc.WithClock(clock)), 100, WithTTL(time.Minute),
		WithObserver(func(hit bool) {
			if hit {
				hits++
			} else {
				misses++
			}
		}))
	ctx := context.Background()
	verify := func(what string) {
		t.Helper()
		d, err := v.Verify(ctx, append([]byte(" "), raw...), vc.ForAudience(serverDID))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d.Hash != want {
			t.Errorf("%s: Hash is not the credential's SHA-256", what)
		}
	}
	verify("first use")
	for range 3 {
		verify("hit")
	}
	in := keyInput(t, v, raw, vc.ForAudience(serverDID))
	if _, _, _, known := v.recent.key(in, len(raw)); !known || hits != 3 || misses != 1 {
		t.Fatalf("memo known %v after %d hits, %d misses; want known after 3 and 1", known, hits, misses)
	}
	now = now.Add(2 * time.Minute) // past the cache TTL
	verify("miss with a known key")
	if misses != 2 {
		t.Fatalf("%d misses, want 2: the expired entry was served", misses)
	}
}
