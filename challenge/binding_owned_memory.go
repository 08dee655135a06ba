package challenge

import (
	"context"
	"crypto/sha256"
	"slices"
	"time"
)

// ownerQueue is one owner's live owned bindings of one kind, oldest first.
// Entries that expired or were replaced stay in order until they reach
// the front or the queue is compacted; live counts only the live ones.
type ownerQueue struct {
	order []*memEntry
	live  int
}

// BindOwned implements OwnedBinder. The binding counts against owner's
// bindings of kind: when owner holds max of them, its oldest is dropped.
// The partition of kind is bounded as any other (Bind): a full one fails
// with ErrStoreFull, whoever the owner.
func (m *MemoryStore) BindOwned(ctx context.Context, kind, owner, key string, value []byte, ttl time.Duration, max int) error {
	if err := checkOwnedArgs(kind, owner, ttl, max); err != nil {
		return err
	}
	if err := m.open(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	// The key's old binding goes first, so that binding it again counts
	// once against its owner.
	m.unbind(key)
	id := ownerID(kind, owner)
	if q := m.owners[id]; q != nil {
		for q.live >= max {
			m.remove(q.oldest())
		}
	}
	e, err := m.bind(key, value, ttl, id)
	if err != nil {
		return err
	}
	// The queue is looked up again: dropping the owner's last binding
	// above forgets its queue.
	q := m.owners[id]
	if q == nil {
		q = &ownerQueue{}
		m.owners[id] = q
	}
	q.order = append(q.order, e)
	q.live++
	return nil
}

// Take implements OwnedBinder.
func (m *MemoryStore) Take(ctx context.Context, key string) ([]byte, error) {
	if err := m.open(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	e, ok := m.liveBinding(key)
	if !ok {
		return nil, ErrBindingNotFound
	}
	m.remove(e)
	return e.value, nil
}

// oldest returns the queue's oldest live entry; the queue has one.
func (q *ownerQueue) oldest() *memEntry {
	for {
		e := q.order[0]
		q.order[0] = nil
		q.order = q.order[1:]
		if e.owner != "" {
			return e
		}
	}
}

// disown takes e off its owner's count when it leaves the store; the
// queue drops it lazily (it is marked by an empty owner), and an owner
// with nothing live is forgotten. m.mu is held.
func (m *MemoryStore) disown(e *memEntry) {
	id := e.owner
	e.owner = ""
	q := m.owners[id]
	if q == nil {
		return
	}
	if q.live--; q.live <= 0 {
		delete(m.owners, id)
		return
	}
	// Compact when most of the queue is dead, so that an owner whose
	// bindings keep expiring does not grow it without end.
	if len(q.order) > 2*q.live+16 {
		q.order = slices.DeleteFunc(q.order, func(x *memEntry) bool { return x.owner == "" })
	}
}

// ownerID is the key of an owner's queue: the kind and a hash of the
// owner (DIDs can be long; the store need not keep them).
func ownerID(kind, owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return kind + ":" + string(sum[:])
}

var _ OwnedBinder = (*MemoryStore)(nil)
