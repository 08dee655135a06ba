package ratelimit

import (
	"context"
	"sync"
	"time"
)

// DefaultMaxKeys bounds a Memory store.
const DefaultMaxKeys = 100000

// sweepEvery is how often a Memory store forgets its idle keys.
const sweepEvery = time.Second

// Memory is a Store in this process: right for one replica (each replica
// of several would count on its own). It holds at most maxKeys keys; a key
// is forgotten once idle long enough to have its whole burst again, which
// changes no decision. When every key it holds is live, a new key gets
// ErrFull rather than pushing out a live one (which would hand that key a
// fresh burst).
type Memory struct {
	now  func() time.Time
	base time.Time
	max  int

	mu        sync.Mutex
	tat       map[string]int64 // nanoseconds since base
	lastSweep int64
}

// NewMemory returns a store holding at most maxKeys keys (0:
// DefaultMaxKeys), reading time from now (nil: time.Now).
func NewMemory(maxKeys int, now func() time.Time) *Memory {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, base: now(), max: maxKeys, tat: make(map[string]int64)}
}

// Take implements Store.
func (m *Memory) Take(_ context.Context, key string, q Quota, n int) (Result, error) {
	now := int64(m.now().Sub(m.base))
	m.mu.Lock()
	defer m.mu.Unlock()
	if now-m.lastSweep >= int64(sweepEvery) {
		m.sweep(now)
	}
	tat, ok := m.tat[key]
	if !ok && len(m.tat) >= m.max {
		// Not swept here: a store full of live keys would sweep them all
		// on every new key. The next sweep frees what went idle.
		return Result{}, ErrFull
	}
	next, allowed, retry, remaining := gcra(tat, now, int64(q.Interval), int64(q.Burst), int64(n))
	if next > now {
		m.tat[key] = next
	} else {
		delete(m.tat, key) // idle: its whole burst, as if never seen
	}
	return Result{Allowed: allowed, RetryAfter: time.Duration(retry), Remaining: int(remaining), Fresh: !ok || tat <= now}, nil
}

// sweep forgets the keys whose time is past; m.mu is held.
func (m *Memory) sweep(now int64) {
	for k, t := range m.tat {
		if t <= now {
			delete(m.tat, k)
		}
	}
	m.lastSweep = now
}

// Len is how many keys the store holds.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.tat)
}
