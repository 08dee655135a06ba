package cache

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestResultCacheEntryOwnsStrings: an entry's strings are one block of
// their own, not views into the decoded claims of the credential (which
// they would keep alive for as long as the entry lives), and say the same
// as what the caller got.
func TestResultCacheEntryOwnsStrings(t *testing.T) {
	f := newFixture(t)
	v, _, _ := f.cached(&testClock{t: fixedNow}, 100, nil)
	raw := issue(t, f.ed, f.vc11Claims(f.ed))
	d, err := v.Verify(context.Background(), raw, vc.ForAudience(serverDID))
	if err != nil {
		t.Fatal(err)
	}
	var e *resultEntry
	for i := range v.shards {
		for _, x := range v.shards[i].entries {
			e = x
		}
	}
	if e == nil {
		t.Fatal("not cached")
	}
	if got := e.d.Clone(); !reflect.DeepEqual(got, d) {
		t.Fatalf("entry %+v, caller %+v", e.d, d)
	}
	// One block holding each distinct value once, in the order
	// detachStrings meets them: here the user is the issuer and the
	// chain's one id the credential's.
	strs := []string{e.d.AgentDID, e.d.UserDID, e.d.Issuer, e.d.ID, e.d.DelegationID, e.d.Constraints}
	strs = append(strs, e.d.Scopes...)
	strs = append(strs, e.d.Audience...)
	strs = append(strs, e.d.Chain...)
	var distinct []string
	for _, s := range strs {
		if !slices.Contains(distinct, s) {
			distinct = append(distinct, s)
		}
	}
	if len(distinct) >= len(strs) {
		t.Fatalf("fixture: no repeated value in %q", strs)
	}
	base, off := unsafe.Pointer(unsafe.StringData(e.d.AgentDID)), 0
	for _, u := range distinct {
		for _, s := range strs {
			if s == u && unsafe.Pointer(unsafe.StringData(s)) != unsafe.Add(base, off) {
				t.Fatalf("%q is not at its place in the entry's block", s)
			}
		}
		off += len(u)
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
	v := New(vc.NewVerifier(res, vc.WithClock(func() time.Time { return fixedNow })), 100, WithObserver(hc.observe))
	raw := issue(t, f.ed, f.vc11Claims(f.ed))
	ctx := context.Background()
	var (
		wg        sync.WaitGroup
		recovered any
		d         *vc.Delegation
		err       error
	)
	wg.Go(func() {
		defer func() { recovered = recover() }()
		v.Verify(ctx, raw, vc.ForAudience(serverDID))
	})
	for res.n.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	wg.Go(func() { d, err = v.Verify(ctx, raw, vc.ForAudience(serverDID)) })
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

// TestResultCacheManyScopes: a delegation whose lists do not fit an
// entry's own room is cached and served like any other.
func TestResultCacheManyScopes(t *testing.T) {
	f := newFixture(t)
	v, _, hc := f.cached(&testClock{t: fixedNow}, 100, nil)
	claims := f.vc11Claims(f.ed)
	scopes := []any{"s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"}
	setPath(claims, "vc.credentialSubject.delegation.scopes", scopes)
	setPath(claims, "vc.credentialSubject.delegation.constraints.scopes", scopes)
	raw := issue(t, f.ed, claims)
	ctx := context.Background()
	first, err := v.Verify(ctx, raw, vc.ForAudience(serverDID))
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Scopes) != len(scopes) {
		t.Fatalf("scopes %q", first.Scopes)
	}
	again, err := v.Verify(ctx, raw, vc.ForAudience(serverDID))
	if err != nil || hc.hits.Load() != 1 || !reflect.DeepEqual(again, first) {
		t.Fatalf("hit: %v, %v; %+v", err, hc, again)
	}
}

// TestDetachStringsCoversEveryField: a string field of vc.Delegation that
// detachStrings does not copy keeps the whole decoded claims of its
// credential alive in the cache (this happened once, with RootIssuer,
// which doubled the cache's memory per entry).
func TestDetachStringsCoversEveryField(t *testing.T) {
	src := strings.Repeat("x", 4096)
	var d vc.Delegation
	v := reflect.ValueOf(&d).Elem()
	n := 0
	for i := range v.NumField() {
		fv := v.Field(i)
		switch {
		case fv.Kind() == reflect.String && fv.Type() == reflect.TypeFor[string]():
			fv.SetString(src[n : n+8])
			n += 8
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String:
			fv.Set(reflect.ValueOf([]string{src[n : n+8]}))
			n += 8
		}
	}
	detachStrings(&d)
	inSrc := func(s string) bool {
		p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(src)))
		return len(s) > 0 && p >= lo && p < lo+uintptr(len(src))
	}
	for i := range v.NumField() {
		fv, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case fv.Kind() == reflect.String && fv.Type() == reflect.TypeFor[string]():
			if inSrc(fv.String()) {
				t.Errorf("%s still points into the decoded claims", name)
			}
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String:
			for j := range fv.Len() {
				if inSrc(fv.Index(j).String()) {
					t.Errorf("%s[%d] still points into the decoded claims", name, j)
				}
			}
		}
	}
}
