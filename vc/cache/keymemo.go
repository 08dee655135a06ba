package cache

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"hash/maphash"
	"sync/atomic"
)

// keyMemo spares a credential the result cache serves again and again (an
// agent's credential on every call) the SHA-256 of its key: about 2 KB
// hashed per request, the largest single cost of a cache hit. It maps the
// key's exact input (the credential, then the rules) to the key, in a few
// slots chosen by a keyed 64-bit hash (maphash, a random seed per cache).
// A slot is trusted only when it holds exactly the same input, compared in
// constant time: the hash chooses the slot, it never identifies the
// credential. A slot holds a mapping SHA-256 would give anyway, so it is
// never stale; the cache entry it leads to is checked as before.
//
// A key is remembered only when the result cache served it, the second
// time in a row its hash came to the slot, and only in place of a key not
// used since the last such attempt (second chance): a flood of one-off
// credentials, or more active credentials than slots taking turns, costs a
// hash and a store of eight bytes, never a copy, and a credential in use
// keeps its slot. The copies are bounded by the slots: keyMemoSlots inputs
// of at most maxKeyOnStack bytes (about 2 KB each for KYA-OS credentials,
// 256 KB in all; 512 KB at most): a longer input is never remembered.
type keyMemo struct {
	seed  maphash.Seed
	slots [keyMemoSlots]keySlot
}

const keyMemoSlots = 128

type keySlot struct {
	known atomic.Pointer[knownKey]
	// seen is the hash of the last input served through this slot
	// without being known: a second one admits it.
	seen atomic.Uint64
}

// knownKey is one remembered input and its key; immutable but for used.
type knownKey struct {
	sum uint64
	in  []byte
	key resultKey
	// used: served from the slot since the last attempt to replace it.
	used atomic.Bool
}

// key returns the cache key of the input in (its SHA-256), and its hash;
// known reports that the key came from a slot (no SHA-256 computed).
// Otherwise cred is the SHA-256 of in's first n bytes, taken on the way
// (keySums).
func (m *keyMemo) key(in []byte, n int) (key resultKey, cred [sha256.Size]byte, sum uint64, known bool) {
	sum = maphash.Bytes(m.seed, in)
	if k := m.slots[sum%keyMemoSlots].known.Load(); k != nil && k.sum == sum && equalConstantTime(k.in, in) {
		if !k.used.Load() {
			k.used.Store(true)
		}
		return k.key, cred, sum, true
	}
	key, cred = keySums(in, n)
	return key, cred, sum, false
}

// served records that the result cache served key for in (whose hash is
// sum), which key did not find in a slot: the second time, in takes the
// slot.
func (m *keyMemo) served(sum uint64, in []byte, key *resultKey) {
	if len(in) > maxKeyOnStack {
		// A credential this long (the edge takes up to
		// max_credential_size) pays its SHA-256 on every use rather than
		// have 128 slots keep megabytes.
		return
	}
	s := &m.slots[sum%keyMemoSlots]
	if s.seen.Swap(sum) != sum {
		return
	}
	if old := s.known.Load(); old != nil && old.used.Swap(false) {
		return // in use: a second chance
	}
	s.known.Store(&knownKey{sum: sum, in: bytes.Clone(in), key: *key})
}

// equalConstantTime reports whether a and b are equal, in a time that
// depends on their lengths only: subtle.XORBytes (vectorised) in chunks,
// and the differences or-ed together eight bytes at a time.
// subtle.ConstantTimeCompare, a byte at a time, took about as long as the
// SHA-256 this spares.
func equalConstantTime(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	var scratch [512]byte
	var diff uint64
	for len(a) > 0 {
		n := min(len(a), len(scratch))
		subtle.XORBytes(scratch[:n], a[:n], b[:n])
		x := scratch[:n]
		for len(x) >= 8 {
			diff |= binary.LittleEndian.Uint64(x)
			x = x[8:]
		}
		for _, c := range x {
			diff |= uint64(c)
		}
		a, b = a[n:], b[n:]
	}
	return diff == 0
}
