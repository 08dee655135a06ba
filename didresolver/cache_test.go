package didresolver

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// countingResolver serves documents from a map and counts upstream calls.
type countingResolver struct {
	mu    sync.Mutex
	docs  map[string]*Document
	errs  map[string]error
	calls map[string]int
	total atomic.Int64
	// gate, when set, holds every call until it is closed; entered
	// receives a value as each call starts.
	gate    chan struct{}
	entered chan struct{}
}

func newCounting() *countingResolver {
	return &countingResolver{docs: map[string]*Document{}, errs: map[string]error{}, calls: map[string]int{}}
}

func (r *countingResolver) set(did string, doc *Document, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.docs[did], r.errs[did] = doc, err
}

func (r *countingResolver) count(did string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[did]
}

func (r *countingResolver) Resolve(ctx context.Context, did string) (*Document, error) {
	r.total.Add(1)
	r.mu.Lock()
	r.calls[did]++
	gate, entered := r.gate, r.entered
	r.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if gate != nil {
		<-gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.errs[did]; err != nil {
		return nil, err
	}
	if doc := r.docs[did]; doc != nil {
		return doc, nil
	}
	return nil, fmt.Errorf("%w: test", ErrNotFound)
}

// edDoc is a did:web document whose methods are the given Ed25519 keys,
// all under authentication, with ids #k0, #k1, ….
func edDoc(did string, keys ...ed25519.PublicKey) *Document {
	doc := &Document{ID: did}
	for i, k := range keys {
		mb, _ := encodeMultibaseKey(k)
		id := fmt.Sprintf("%s#k%d", did, i)
		doc.VerificationMethod = append(doc.VerificationMethod, VerificationMethod{ID: id, Type: "Multikey", PublicKeyMultibase: mb})
		doc.Authentication = append(doc.Authentication, MethodRef{Ref: id})
	}
	return doc
}

func TestCacheTTL(t *testing.T) {
	const did = "did:web:example.com"
	up := newCounting()
	up.set(did, edDoc(did), nil)
	clock := newFakeClock()
	c := NewCache(up, WithTTL(time.Minute), WithCacheClock(clock.Now))
	ctx := context.Background()
	for range 3 {
		if doc, err := c.Resolve(ctx, did); err != nil || doc.ID != did {
			t.Fatal(err)
		}
	}
	// A DID URL shares the DID's entry.
	if _, err := c.Resolve(ctx, did+"#k0"); err != nil {
		t.Fatal(err)
	}
	if n := up.count(did); n != 1 {
		t.Fatalf("%d fetches before expiry", n)
	}
	clock.Advance(time.Minute - time.Second)
	c.Resolve(ctx, did)
	if n := up.count(did); n != 1 {
		t.Fatalf("%d fetches just before expiry", n)
	}
	clock.Advance(time.Second)
	c.Resolve(ctx, did)
	if n := up.count(did); n != 2 {
		t.Fatalf("%d fetches after expiry", n)
	}
}

func TestCacheNegative(t *testing.T) {
	const did = "did:web:missing.example"
	up := newCounting()
	clock := newFakeClock()
	c := NewCache(up, WithNegativeTTL(10*time.Second), WithCacheClock(clock.Now))
	ctx := context.Background()
	for range 3 {
		_, err := c.Resolve(ctx, did)
		wantErr(t, err, ErrNotFound)
	}
	if n := up.count(did); n != 1 {
		t.Fatalf("%d fetches of a failing DID", n)
	}
	clock.Advance(10 * time.Second)
	up.set(did, edDoc(did), nil)
	if _, err := c.Resolve(ctx, did); err != nil {
		t.Fatalf("after negative TTL: %v", err)
	}
	if n := up.count(did); n != 2 {
		t.Fatalf("%d fetches", n)
	}

	// Zero disables negative caching.
	c = NewCache(up, WithNegativeTTL(0), WithCacheClock(clock.Now))
	const gone = "did:web:gone.example"
	c.Resolve(ctx, gone)
	c.Resolve(ctx, gone)
	if n := up.count(gone); n != 2 {
		t.Fatalf("negative TTL 0: %d fetches", n)
	}
}

func TestCacheDoesNotRememberCancellation(t *testing.T) {
	const did = "did:web:example.com"
	up := newCounting()
	up.set(did, nil, fmt.Errorf("%w: %w", ErrFetch, context.Canceled))
	c := NewCache(up)
	ctx := context.Background()
	c.Resolve(ctx, did)
	up.set(did, edDoc(did), nil)
	if _, err := c.Resolve(ctx, did); err != nil {
		t.Fatalf("cancellation was cached: %v", err)
	}
	if n := up.count(did); n != 2 {
		t.Fatalf("%d fetches", n)
	}
}

func TestCacheCallerCancellation(t *testing.T) {
	const did = "did:web:slow.example"
	up := newCounting()
	up.set(did, edDoc(did), nil)
	up.gate = make(chan struct{})
	up.entered = make(chan struct{}, 1)
	c := NewCache(up)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Resolve(ctx, did)
		done <- err
	}()
	<-up.entered
	cancel()
	err := <-done
	wantErr(t, err, ErrFetch)
	checkOneSentinel(t, err)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	// The detached fetch completes and is cached for the next caller.
	close(up.gate)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		_, ok := c.entries[did]
		c.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("fetch result never cached")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Resolve(context.Background(), did); err != nil {
		t.Fatal(err)
	}
	if n := up.count(did); n != 1 {
		t.Fatalf("%d fetches", n)
	}
}

func TestCacheSingleflight(t *testing.T) {
	const did = "did:web:example.com"
	const n = 50
	up := newCounting()
	up.set(did, edDoc(did), nil)
	up.gate = make(chan struct{})
	up.entered = make(chan struct{}, n)
	c := NewCache(up)
	var wg sync.WaitGroup
	var started sync.WaitGroup
	errs := make(chan error, n)
	started.Add(n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			doc, err := c.Resolve(context.Background(), did)
			if err == nil && doc.ID != did {
				err = errors.New("wrong document")
			}
			errs <- err
		}()
	}
	started.Wait()
	<-up.entered
	// Give the other goroutines time to join the fetch in flight.
	time.Sleep(50 * time.Millisecond)
	close(up.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := up.total.Load(); got != 1 {
		t.Fatalf("%d upstream fetches for %d concurrent resolutions", got, n)
	}
}

func TestCacheRefreshOnUnknownKid(t *testing.T) {
	const did = "did:web:rotating.example"
	k0 := mustGenerate(t, Ed25519).(ed25519.PublicKey)
	k1 := mustGenerate(t, Ed25519).(ed25519.PublicKey)
	up := newCounting()
	up.set(did, edDoc(did, k0), nil)
	clock := newFakeClock()
	c := NewCache(up, WithRefreshInterval(30*time.Second), WithCacheClock(clock.Now))
	ctx := context.Background()

	if _, err := ResolveKey(ctx, c, did+"#k0", Authentication); err != nil {
		t.Fatal(err)
	}
	// The DID's host rotates in a second key.
	up.set(did, edDoc(did, k0, k1), nil)

	// Within the refresh interval the cached document answers: the new
	// key is not found yet, and no fetch happens however often it is asked.
	clock.Advance(10 * time.Second)
	for range 5 {
		_, err := ResolveKey(ctx, c, did+"#k1", Authentication)
		wantErr(t, err, ErrKeyNotFound)
	}
	if n := up.count(did); n != 1 {
		t.Fatalf("%d fetches within the refresh interval", n)
	}

	clock.Advance(21 * time.Second)
	k, err := ResolveKey(ctx, c, did+"#k1", Authentication)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Equal(k.Public) {
		t.Fatal("wrong key after refresh")
	}
	if n := up.count(did); n != 2 {
		t.Fatalf("%d fetches", n)
	}
	// The refreshed document now serves ordinary lookups.
	if _, err := ResolveKey(ctx, c, did+"#k1", Authentication); err != nil {
		t.Fatal(err)
	}
	if n := up.count(did); n != 2 {
		t.Fatalf("%d fetches", n)
	}

	// A known but unauthorized key does not trigger a refresh.
	clock.Advance(time.Minute)
	doc := edDoc(did, k0, k1)
	doc.Authentication = doc.Authentication[:1]
	up.set(did, doc, nil)
	c2 := NewCache(up, WithCacheClock(clock.Now))
	before := up.count(did)
	c2.Resolve(ctx, did)
	clock.Advance(time.Minute)
	_, err = ResolveKey(ctx, c2, did+"#k1", Authentication)
	wantErr(t, err, ErrKeyNotAuthorized)
	if n := up.count(did) - before; n != 1 {
		t.Fatalf("%d fetches for an unauthorized key", n)
	}
}

func TestCacheFailedRefreshKeepsDocument(t *testing.T) {
	const did = "did:web:flaky.example"
	k0 := mustGenerate(t, Ed25519).(ed25519.PublicKey)
	up := newCounting()
	up.set(did, edDoc(did, k0), nil)
	clock := newFakeClock()
	c := NewCache(up, WithCacheClock(clock.Now))
	ctx := context.Background()
	c.Resolve(ctx, did)
	up.set(did, nil, fmt.Errorf("%w: down", ErrFetch))
	clock.Advance(time.Minute)
	_, err := ResolveKey(ctx, c, did+"#k9", Authentication)
	wantErr(t, err, ErrFetch)
	// The still-valid document keeps serving known keys.
	if _, err := ResolveKey(ctx, c, did+"#k0", Authentication); err != nil {
		t.Fatal(err)
	}
	if n := up.count(did); n != 2 {
		t.Fatalf("%d fetches", n)
	}
}

func TestCacheEviction(t *testing.T) {
	up := newCounting()
	dids := make([]string, 5)
	for i := range dids {
		dids[i] = fmt.Sprintf("did:web:host%d.example", i)
		up.set(dids[i], edDoc(dids[i]), nil)
	}
	c := NewCache(up, WithMaxEntries(3))
	ctx := context.Background()
	for _, d := range dids[:3] {
		c.Resolve(ctx, d)
	}
	c.Resolve(ctx, dids[0]) // most recently used now: 0, 2, 1
	c.Resolve(ctx, dids[3]) // evicts 1
	c.Resolve(ctx, dids[4]) // evicts 2
	c.mu.Lock()
	size, listLen := len(c.entries), c.lru.Len()
	c.mu.Unlock()
	if size != 3 || listLen != 3 {
		t.Fatalf("cache holds %d entries (list %d), want 3", size, listLen)
	}
	c.Resolve(ctx, dids[0])
	if n := up.count(dids[0]); n != 1 {
		t.Fatalf("recently used entry was evicted (%d fetches)", n)
	}
	c.Resolve(ctx, dids[1])
	if n := up.count(dids[1]); n != 2 {
		t.Fatalf("least recently used entry was kept (%d fetches)", n)
	}
}

func TestCachePureMethodsBypass(t *testing.T) {
	pub := mustGenerate(t, Ed25519)
	did, kid, _ := KeyDID(pub)
	jwkDID, _ := JWKDID(pub)
	up := &countingResolver{docs: map[string]*Document{}, errs: map[string]error{}, calls: map[string]int{}}
	c := NewCache(resolverFunc(func(ctx context.Context, d string) (*Document, error) {
		up.Resolve(ctx, d)
		return New().Resolve(ctx, d)
	}))
	for range 3 {
		if _, err := ResolveKey(context.Background(), c, kid, Authentication); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Resolve(context.Background(), jwkDID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Refresh(context.Background(), did); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	n := len(c.entries)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d cache entries for pure DIDs", n)
	}
	if up.total.Load() != 9 {
		t.Fatalf("%d upstream calls", up.total.Load())
	}
	_, err := c.Resolve(context.Background(), "did:KEY:x")
	wantErr(t, err, ErrInvalidDID)
}

type resolverFunc func(ctx context.Context, did string) (*Document, error)

func (f resolverFunc) Resolve(ctx context.Context, did string) (*Document, error) { return f(ctx, did) }

func TestResolveKey(t *testing.T) {
	ctx := context.Background()
	k0 := mustGenerate(t, Ed25519).(ed25519.PublicKey)
	k1 := mustGenerate(t, Ed25519).(ed25519.PublicKey)
	docs := map[string]*Document{
		"did:web:one.example":  edDoc("did:web:one.example", k0),
		"did:web:two.example":  edDoc("did:web:two.example", k0, k1),
		"did:web:liar.example": edDoc("did:web:other.example", k0),
	}
	r := resolverFunc(func(_ context.Context, d string) (*Document, error) {
		if doc := docs[d]; doc != nil {
			return doc, nil
		}
		return nil, fmt.Errorf("%w: test", ErrNotFound)
	})
	tests := []struct {
		kid string
		err error
	}{
		{"did:web:one.example", nil},
		{"did:web:one.example#k0", nil},
		{"did:web:two.example", ErrKeyNotFound},
		{"did:web:two.example#k1", nil},
		{"did:web:two.example#k2", ErrKeyNotFound},
		{"did:web:liar.example#k0", ErrIDMismatch},
		{"did:web:none.example#k0", ErrNotFound},
		{"#k0", ErrInvalidDID},
		{"", ErrInvalidDID},
	}
	for _, tc := range tests {
		t.Run(tc.kid, func(t *testing.T) {
			k, err := ResolveKey(ctx, r, tc.kid, Authentication)
			wantErr(t, err, tc.err)
			checkOneSentinel(t, err)
			if err == nil && k.ID == "" {
				t.Fatal("key without id")
			}
		})
	}
	k, _ := ResolveKey(ctx, r, "did:web:one.example", Authentication)
	if k.ID != "did:web:one.example#k0" || !k0.Equal(k.Public) {
		t.Fatalf("no-fragment key %q", k.ID)
	}
}
