package kyaos

import (
	"crypto"
	"crypto/ed25519"
	"encoding/binary"
	"sync"
)

// keyMemo remembers Ed25519 keys already found fit (keyFits: a valid
// point, not of small order), so that the agents that send proof after
// proof are not checked again each time: the check decompresses the point,
// about a tenth of a verification. Only keys found fit are remembered, by
// their whole 32 bytes, so a key never checked is always checked. It is
// direct-mapped and fixed in size (memoSlots keys, a few tens of KB, no
// pointers): a key whose slot another takes is checked again next time,
// nothing worse.
type keyMemo struct {
	mu    sync.Mutex
	keys  [memoSlots][ed25519.PublicKeySize]byte
	valid [memoSlots]bool
}

const memoSlots = 1024

// fits is keyFits(alg, pub), remembering fit Ed25519 keys.
func (m *keyMemo) fits(alg string, pub crypto.PublicKey) bool {
	k, ok := pub.(ed25519.PublicKey)
	if !ok || alg != AlgEdDSA || len(k) != ed25519.PublicKeySize {
		return keyFits(alg, pub)
	}
	var key [ed25519.PublicKeySize]byte
	copy(key[:], k)
	slot := memoSlot(&key)
	m.mu.Lock()
	known := m.valid[slot] && m.keys[slot] == key
	m.mu.Unlock()
	if known {
		return true
	}
	if !keyFits(alg, pub) {
		return false
	}
	m.mu.Lock()
	m.keys[slot], m.valid[slot] = key, true
	m.mu.Unlock()
	return true
}

// memoSlot is where key is remembered. Keys are public and chosen by
// their holders: one that collides with another only evicts it.
func memoSlot(key *[ed25519.PublicKeySize]byte) int {
	return int(binary.LittleEndian.Uint32(key[:4]) % memoSlots)
}
