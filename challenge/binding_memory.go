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
	now := m.now()
	if e, ok := m.bindings[key]; ok {
		m.remove(e)
	}
	part := partitionOfKey(true, key)
	if !m.room(part, now) {
		return ErrStoreFull
	}
	m.add(&memEntry{nonce: key, binding: true, value: slices.Clone(value), expiry: now.Add(ttl), part: part})
	return nil
}

// Lookup implements SessionBinder.
func (m *MemoryStore) Lookup(ctx context.Context, key string) ([]byte, error) {
	if err := m.open(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	e, ok := m.bindings[key]
	if !ok {
		return nil, ErrBindingNotFound
	}
	if !m.now().Before(e.expiry) {
		m.remove(e)
		return nil, ErrBindingNotFound
	}
	// Stored values are never modified (Bind replaces the entry), so the
	// caller may share this one.
	return e.value, nil
}

// Bindings returns the number of bindings held, expired or not.
func (m *MemoryStore) Bindings() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.bindings)
}

var _ SessionBinder = (*MemoryStore)(nil)
