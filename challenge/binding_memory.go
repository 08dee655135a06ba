package challenge

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Bind implements SessionBinder. A binding replaces the one under key;
// when its partition holds MaxEntries live bindings, expired ones are
// evicted first, and otherwise Bind fails with ErrStoreFull rather than
// drop a live one.
func (m *MemoryStore) Bind(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("challenge: memory store: ttl must be positive")
	}
	if err := m.open(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.unbind(key)
	_, err := m.bind(key, value, ttl, "")
	return err
}

// unbind drops the binding under key, if any. m.mu is held.
func (m *MemoryStore) unbind(key string) {
	if e, ok := m.bindings[key]; ok {
		m.remove(e)
	}
}

// bind stores a binding under key, where none is (unbind), counted against
// owner's queue when owner is set; it fails with ErrStoreFull when the
// key's partition holds its maximum of live entries. m.mu is held.
func (m *MemoryStore) bind(key string, value []byte, ttl time.Duration, owner string) (*memEntry, error) {
	now := m.now()
	part := partitionOfKey(true, key)
	if !m.room(part, now) {
		return nil, ErrStoreFull
	}
	e := &memEntry{nonce: key, binding: true, value: slices.Clone(value), expiry: now.Add(ttl), part: part, owner: owner}
	m.add(e)
	return e, nil
}

// Lookup implements SessionBinder.
func (m *MemoryStore) Lookup(ctx context.Context, key string) ([]byte, error) {
	if err := m.open(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	e, ok := m.liveBinding(key)
	if !ok {
		return nil, ErrBindingNotFound
	}
	// Stored values are never modified (Bind replaces the entry), so the
	// caller may share this one.
	return e.value, nil
}

// liveBinding returns the binding under key unless it is absent or
// expired (an expired one is dropped). m.mu is held.
func (m *MemoryStore) liveBinding(key string) (*memEntry, bool) {
	e, ok := m.bindings[key]
	if !ok {
		return nil, false
	}
	if !m.now().Before(e.expiry) {
		m.remove(e)
		return nil, false
	}
	return e, true
}

// Bindings returns the number of bindings held, expired or not.
func (m *MemoryStore) Bindings() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.bindings)
}

var _ SessionBinder = (*MemoryStore)(nil)
