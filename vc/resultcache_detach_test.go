package vc

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// TestResultCacheEntryOwnsStrings: an entry's strings are one block of
// their own, not views into the decoded claims of the credential (which
// they would keep alive for as long as the entry lives), and say the same
// as what the caller got.
func TestResultCacheEntryOwnsStrings(t *testing.T) {
	f := newFixture(t)
	v, _, _ := f.cachedVerifier(&testClock{t: fixedNow}, 100)
	raw := mint(t, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed))
	d, err := v.Verify(context.Background(), raw, ForAudience(serverDID))
	if err != nil {
		t.Fatal(err)
	}
	var e *resultEntry
	for i := range v.results.shards {
		for _, x := range v.results.shards[i].entries {
			e = x
		}
	}
	if e == nil {
		t.Fatal("not cached")
	}
	if got := cloneDelegation(&e.d); !reflect.DeepEqual(got, d) {
		t.Fatalf("entry %+v, caller %+v", e.d, d)
	}
	// In the order detachStrings writes them, each string starts where
	// the one before ended.
	strs := []string{e.d.AgentDID, e.d.UserDID, e.d.Issuer, e.d.ID, e.d.DelegationID}
	strs = append(strs, e.d.Scopes...)
	strs = append(strs, e.d.Audience...)
	strs = append(strs, e.d.Chain...)
	for i := 1; i < len(strs); i++ {
		end := unsafe.Add(unsafe.Pointer(unsafe.StringData(strs[i-1])), len(strs[i-1]))
		if unsafe.Pointer(unsafe.StringData(strs[i])) != end {
			t.Fatalf("string %d (%q) is not in the entry's block", i, strs[i])
		}
	}
	if unsafe.StringData(e.d.AgentDID) == unsafe.StringData(d.AgentDID) {
		t.Fatal("the entry shares the caller's strings")
	}
}

// panicOnce panics in its first resolution, once gate is closed.
type panicOnce struct {
	next didresolver.Resolver
	gate chan struct{}
	n    atomic.Int32
}

func (r *panicOnce) Resolve(ctx context.Context, did string) (*didresolver.Document, error) {
	if r.n.Add(1) == 1 {
		<-r.gate
		panic("resolver bug")
	}
	return r.next.Resolve(ctx, did)
}

// TestResultCacheLeaderPanics: when the verification others wait for
// panics, the panic is the leader's, and each waiter verifies on its own.
func TestResultCacheLeaderPanics(t *testing.T) {
	f := newFixture(t)
	res := &panicOnce{next: f.res, gate: make(chan struct{})}
	hc := &hitCounter{}
	v := NewVerifier(res, WithClock(func() time.Time { return fixedNow }), WithResultCache(100), WithCacheObserver(hc.observe))
	raw := mint(t, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed))
	ctx := context.Background()
	var (
		wg        sync.WaitGroup
		recovered any
		d         *Delegation
		err       error
	)
	wg.Go(func() {
		defer func() { recovered = recover() }()
		v.Verify(ctx, raw, ForAudience(serverDID))
	})
	for res.n.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	wg.Go(func() { d, err = v.Verify(ctx, raw, ForAudience(serverDID)) })
	for hc.misses.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // from the observer into the flight
	close(res.gate)
	wg.Wait()
	if recovered == nil {
		t.Error("the leader did not panic")
	}
	if err != nil || d == nil {
		t.Fatalf("waiter: %v", err)
	}
	if n := res.n.Load(); n != 2 {
		t.Errorf("%d resolutions, want 2", n)
	}
}
