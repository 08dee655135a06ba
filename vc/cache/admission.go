package cache

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
)

// Admission to the verified-delegation cache. While a shard has room,
// every verified credential is stored. Once it is full, storing one evicts
// another, and a credential used only once (a flood of one-off tokens, or
// agents that mint a token per call) would cost an eviction, an entry and
// its strings, and GC work for as long as it stays, and would push out
// entries that are used, for nothing. So a full shard admits a credential
// only the second time it is verified: the first time leaves its key's
// fingerprint in a doorkeeper, the second finds it there.
//
// The doorkeeper is a fixed table of 32-bit fingerprints indexed by other
// bits of the key (a SHA-256: uniform whatever the sender does): it holds
// no pointers, so the GC never scans it, and it never grows. A slot keeps
// the last key that fell into it, so a credential's first sighting is
// forgotten when another key takes its slot: with four slots per cache
// entry, that takes about four times as many other credentials as the
// cache holds. Such a credential is verified once more before it is
// stored; nothing else changes, for the doorkeeper decides only what is
// stored, never what is accepted. A fingerprint that matches by chance (or
// a sender who makes one match) only stores a verified credential, as
// every credential was stored before the doorkeeper.
type doorkeeper struct {
	slots []atomic.Uint32
	mask  uint64
}

// Doorkeeper bounds: four slots per entry, within these.
const (
	minDoorkeeperSlots = 1 << 10
	maxDoorkeeperSlots = 1 << 22 // 16 MiB
)

func newDoorkeeper(maxEntries int) doorkeeper {
	n := min(max(4*maxEntries, minDoorkeeperSlots), maxDoorkeeperSlots)
	n = 1 << bits.Len(uint(n-1)) // a power of two, for the mask
	return doorkeeper{slots: make([]atomic.Uint32, n), mask: uint64(n - 1)}
}

// seenBefore reports whether k's fingerprint is in its slot, and leaves it
// there if not. Concurrent calls may each see the other's fingerprint or
// not: the worst outcome is one credential stored a verification early or
// late.
func (d *doorkeeper) seenBefore(k *resultKey) bool {
	// k[0] picks the shard; the slot and the fingerprint come from bytes
	// of their own. The fingerprint is never 0, an empty slot.
	slot := &d.slots[binary.LittleEndian.Uint64(k[8:16])&d.mask]
	fp := binary.LittleEndian.Uint32(k[16:20]) | 1
	if slot.Load() == fp {
		return true
	}
	slot.Store(fp)
	return false
}
