package challenge

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"
)

// Memory store defaults.
const (
	DefaultMemoryMaxEntries      = 100_000
	DefaultMemoryJanitorInterval = 30 * time.Second
)

// MemoryStore is a bounded, expiring, in-process NonceStore for a single
// replica. Records are indexed by expiry (a min-heap), so freeing room and
// the janitor's sweep only touch expired records. When it holds MaxEntries
// live records, Put evicts expired ones first and otherwise fails with
// ErrStoreFull (which wraps ErrStoreUnavailable): issuing fails closed
// rather than dropping a live challenge.
//
// It is also a SingleUse (singleuse.go): single-use markers are kept
// apart from records, in structures the garbage collector does not scan,
// under the same bound counted separately.
//
// It is also a SessionBinder and an OwnedBinder. Bindings are kept apart
// from the nonce records, and both are split into partitions by kind (the
// key's prefix, one of Kinds): each partition is bounded by MaxEntries on
// its own, so that a flood of one kind (handshake challenges, say) cannot
// starve another (resume tokens, proxy sessions, declarations).
//
// A janitor goroutine removes expired records; it stops when Close is
// called or the context given to NewMemoryStore is done.
type MemoryStore struct {
	mu       sync.Mutex
	entries  map[string]*memEntry
	bindings map[string]*memEntry
	byExpiry expiryHeap
	// held counts the entries of each partition.
	held map[partition]int
	// owners holds, per owner of owned bindings, its bindings in the
	// order they were made (binding_owned_memory.go).
	owners map[string]*ownerQueue
	closed bool
	// used holds the single-use markers (singleuse.go), under a lock of
	// their own.
	used *usedSet

	max      int
	interval time.Duration
	now      func() time.Time

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type memEntry struct {
	nonce  string // the key, for a binding
	rec    Record
	expiry time.Time
	index  int // in byExpiry
	// binding marks a SessionBinder entry (in bindings, value set).
	binding bool
	value   []byte
	// part is the entry's partition; owner the owner of an owned binding.
	part  partition
	owner string
}

// MemoryOption configures NewMemoryStore.
type MemoryOption func(*MemoryStore)

// WithMaxEntries bounds the number of stored challenges. Default 100000.
func WithMaxEntries(n int) MemoryOption {
	return func(m *MemoryStore) {
		if n > 0 {
			m.max = n
		}
	}
}

// WithJanitorInterval sets how often expired records are swept. Default 30s.
func WithJanitorInterval(d time.Duration) MemoryOption {
	return func(m *MemoryStore) {
		if d > 0 {
			m.interval = d
		}
	}
}

// WithMemoryClock injects the store's clock (for record TTLs). Default
// time.Now.
func WithMemoryClock(now func() time.Time) MemoryOption {
	return func(m *MemoryStore) {
		if now != nil {
			m.now = now
		}
	}
}

// NewMemoryStore returns a MemoryStore and starts its janitor, which runs
// until Close or until ctx is done.
func NewMemoryStore(ctx context.Context, opts ...MemoryOption) *MemoryStore {
	m := &MemoryStore{
		entries:  make(map[string]*memEntry),
		bindings: make(map[string]*memEntry),
		held:     make(map[partition]int),
		owners:   make(map[string]*ownerQueue),
		max:      DefaultMemoryMaxEntries,
		interval: DefaultMemoryJanitorInterval,
		now:      time.Now,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	for _, o := range opts {
		o(m)
	}
	m.used = newUsedSet(m.max)
	go m.janitor(ctx)
	return m
}

func (m *MemoryStore) janitor(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.stop:
			return
		case <-t.C:
			m.mu.Lock()
			m.evictExpired(m.now())
			m.mu.Unlock()
			m.used.sweep(m.now())
		}
	}
}

// Close stops the janitor and drops every record; later calls fail with
// ErrStoreUnavailable. It is safe to call more than once.
func (m *MemoryStore) Close() error {
	m.closeOnce.Do(func() {
		close(m.stop)
		<-m.done
		m.mu.Lock()
		m.closed = true
		m.entries = nil
		m.bindings = nil
		m.byExpiry = nil
		m.held = nil
		m.owners = nil
		m.mu.Unlock()
		m.used.close()
	})
	return nil
}

// SetMaxEntries changes the bound (records, bindings and each partition
// of markers alike) of a live store: a process keeps one memory store
// across config reloads that change its bound, so that what it holds
// (used proof nonces above all) outlives the change. A bound below what
// is held drops nothing; new entries are refused until enough expire.
func (m *MemoryStore) SetMaxEntries(n int) {
	if n <= 0 {
		return
	}
	m.mu.Lock()
	m.max = n
	m.mu.Unlock()
	m.used.setMax(n)
}

// Len returns the number of records held, expired or not.
func (m *MemoryStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// Put implements NonceStore.
func (m *MemoryStore) Put(ctx context.Context, nonce string, rec Record, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("challenge: memory store: ttl must be positive")
	}
	if err := m.open(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	now := m.now()
	if e, ok := m.entries[nonce]; ok {
		if now.Before(e.expiry) {
			return ErrNonceExists
		}
		m.remove(e)
	}
	part := partitionOfKey(false, nonce)
	if !m.room(part, now) {
		return ErrStoreFull
	}
	m.add(&memEntry{nonce: nonce, rec: rec, expiry: now.Add(ttl), part: part})
	return nil
}

// open locks m for one operation, unless ctx is done or m is closed: the
// store is then unavailable, and m is left unlocked.
func (m *MemoryStore) open(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return fmt.Errorf("%w: memory store closed", ErrStoreUnavailable)
	}
	return nil
}

// Consume implements NonceStore.
func (m *MemoryStore) Consume(ctx context.Context, nonce string) (Record, error) {
	if err := m.open(ctx); err != nil {
		return Record{}, err
	}
	defer m.mu.Unlock()
	e, ok := m.entries[nonce]
	if !ok {
		return Record{}, ErrNonceNotFound
	}
	m.remove(e)
	if !m.now().Before(e.expiry) {
		return Record{}, ErrNonceNotFound
	}
	return e.rec, nil
}

// Peek implements Peeker.
func (m *MemoryStore) Peek(ctx context.Context, nonce string) (Record, error) {
	if err := m.open(ctx); err != nil {
		return Record{}, err
	}
	defer m.mu.Unlock()
	e, ok := m.entries[nonce]
	if !ok || !m.now().Before(e.expiry) {
		return Record{}, ErrNonceNotFound
	}
	return e.rec, nil
}

func (m *MemoryStore) remove(e *memEntry) {
	m.forget(e)
	heap.Remove(&m.byExpiry, e.index)
}

// forget deletes e from its map and its partition's count (not from the
// heap).
func (m *MemoryStore) forget(e *memEntry) {
	if e.binding {
		delete(m.bindings, e.nonce)
	} else {
		delete(m.entries, e.nonce)
	}
	if m.held[e.part]--; m.held[e.part] <= 0 {
		delete(m.held, e.part)
	}
	if e.owner != "" {
		m.disown(e)
	}
}

// add stores e in its map and partition, and indexes its expiry. m.mu is
// held and there is room (m.room).
func (m *MemoryStore) add(e *memEntry) {
	if e.binding {
		m.bindings[e.nonce] = e
	} else {
		m.entries[e.nonce] = e
	}
	m.held[e.part]++
	heap.Push(&m.byExpiry, e)
}

// room reports whether part can take one more entry, evicting expired
// entries first when it is full. m.mu is held.
func (m *MemoryStore) room(part partition, now time.Time) bool {
	if m.held[part] < m.max {
		return true
	}
	m.evictExpired(now)
	return m.held[part] < m.max
}

// evictExpired pops records and bindings whose expiry is not after now.
// m.mu is held.
func (m *MemoryStore) evictExpired(now time.Time) {
	for len(m.byExpiry) > 0 && !now.Before(m.byExpiry[0].expiry) {
		m.forget(heap.Pop(&m.byExpiry).(*memEntry))
	}
}

// expiryHeap is a min-heap of entries by expiry.
type expiryHeap []*memEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expiry.Before(h[j].expiry) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *expiryHeap) Push(x any) {
	e := x.(*memEntry)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *expiryHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	e.index = -1
	return e
}

var (
	_ NonceStore = (*MemoryStore)(nil)
	_ Peeker     = (*MemoryStore)(nil)
)
