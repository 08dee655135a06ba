package challenge

import "sync"

// Bounds counts the bounds (max entries) that the users of one shared
// memory store ask for, and sets the store's bound to the largest: while a
// configuration is replaced by another both bounds are live, so the store
// never shrinks under the one still serving; when the old one lets go, the
// new bound holds alone. The zero value is ready.
type Bounds struct {
	mu sync.Mutex
	n  map[int]int
}

// Add counts a user asking for n entries of s.
func (b *Bounds) Add(s NonceStore, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == nil {
		b.n = map[int]int{}
	}
	b.n[n]++
	b.apply(s)
}

// Remove drops a user that asked for n entries of s.
func (b *Bounds) Remove(s NonceStore, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n[n]--; b.n[n] <= 0 {
		delete(b.n, n)
	}
	b.apply(s)
}

// apply sets s's bound to the largest counted; b.mu is held.
func (b *Bounds) apply(s NonceStore) {
	largest := 0
	for n := range b.n {
		largest = max(largest, n)
	}
	if r, ok := s.(interface{ SetMaxEntries(int) }); ok && largest > 0 {
		r.SetMaxEntries(largest)
	}
}
