package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

func TestResultCacheHit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	noAud := f.vc11Claims(f.ed)
	delete(noAud, "aud")
	setPath(noAud, "vc.credentialSubject.delegation.constraints.audience", del)
	creds := map[string][]byte{
		"vc-jwt":             issue(t, f.ed, f.vc11Claims(f.ed)),
		"naming no audience": issue(t, f.ed, noAud),
	}
	for name, raw := range creds {
		t.Run(name, func(t *testing.T) {
			v, res, hc := f.cached(&testClock{t: fixedNow}, 100, nil)
			want, err := v.Verify(ctx, raw, vc.ForAudience(serverDID))
			if err != nil {
				t.Fatal(err)
			}
			expectCalls(t, res, 1, "first")
			for _, r := range [][]byte{raw, append(append([]byte(" \n"), raw...), '\t')} {
				got, err := v.Verify(ctx, r, vc.ForAudience(serverDID))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) || got == want {
					t.Fatalf("hit = %+v (same pointer %v), want %+v", got, got == want, want)
				}
			}
			expectCalls(t, res, 1, "hits")
			if hc.hits.Load() != 2 || hc.misses.Load() != 1 {
				t.Errorf("observer: %v", hc)
			}
			// Uncached, the same result.
			plain, err := f.verifier().Verify(ctx, raw, vc.ForAudience(serverDID))
			if err != nil || !reflect.DeepEqual(plain, want) {
				t.Errorf("uncached %+v, %v", plain, err)
			}
		})
	}
}

// TestResultCacheKeyedByChecks: a result is served only to a call with the
// same rules.
func TestResultCacheKeyedByChecks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	raw := issue(t, f.ed, f.vc11Claims(f.ed)) // aud serverDID; greeting:read, greeting:write
	const other = "did:web:other.example.com"
	v, res, _ := f.cached(&testClock{t: fixedNow}, 100, nil)

	steps := []struct {
		name  string
		opts  []vc.CheckOption
		want  error
		calls int64 // total resolutions after the step
	}{
		{"audience A", []vc.CheckOption{vc.ForAudience(serverDID)}, nil, 1},
		{"audience A again", []vc.CheckOption{vc.ForAudience(serverDID)}, nil, 1},
		{"audience B", []vc.CheckOption{vc.ForAudience(other)}, vc.ErrAudience, 2},
		{"audience B again", []vc.CheckOption{vc.ForAudience(other)}, vc.ErrAudience, 3},
		{"no audience", nil, vc.ErrAudience, 4},
		{"A and B", []vc.CheckOption{vc.ForAudience(other, serverDID)}, nil, 5},
		{"one scope", []vc.CheckOption{vc.ForAudience(serverDID), vc.RequireScopes("greeting:read")}, nil, 6},
		{"one scope again", []vc.CheckOption{vc.ForAudience(serverDID), vc.RequireScopes("greeting:read")}, nil, 6},
		{"more scopes", []vc.CheckOption{vc.ForAudience(serverDID), vc.RequireScopes("greeting:read", "admin")}, vc.ErrMissingScope, 7},
		{"other scope", []vc.CheckOption{vc.ForAudience(serverDID), vc.RequireScopes("admin")}, vc.ErrMissingScope, 8},
		{"scopes split over options", []vc.CheckOption{vc.ForAudience(serverDID), vc.RequireScopes("greeting:read"), vc.RequireScopes("admin")}, vc.ErrMissingScope, 9},
		{"audience A still cached", []vc.CheckOption{vc.ForAudience(serverDID)}, nil, 9},
		{"require audience", []vc.CheckOption{vc.ForAudience(serverDID), vc.RequireAudience()}, nil, 10},
		{"require audience again", []vc.CheckOption{vc.ForAudience(serverDID), vc.RequireAudience()}, nil, 10},
	}
	for _, s := range steps {
		_, err := v.Verify(ctx, raw, s.opts...)
		if !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
			t.Fatalf("%s: err = %v, want %v", s.name, err, s.want)
		}
		expectCalls(t, res, s.calls, s.name)
	}

	// vc.RequireAudience against a credential naming none.
	noAud := f.vc11Claims(f.ed)
	delete(noAud, "aud")
	setPath(noAud, "vc.credentialSubject.delegation.constraints.audience", del)
	bare := issue(t, f.ed, noAud)
	if _, err := v.Verify(ctx, bare, vc.ForAudience(serverDID)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, bare, vc.ForAudience(serverDID), vc.RequireAudience()); !errors.Is(err, vc.ErrAudience) {
		t.Fatalf("RequireAudience after a cached success: err = %v", err)
	}
}

// TestResultCacheAncestors: the ancestors given are part of the key.
func TestResultCacheAncestors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ch := f.chain3(t)
	v, res, _ := f.cached(&testClock{t: fixedNow}, 100, nil, vc.WithTrustedIssuers(f.ed.did))
	aud := vc.ForAudience(serverDID)
	d, err := v.Verify(ctx, ch.leaf, aud, vc.WithAncestors(ch.root, ch.middle))
	if err != nil || len(d.Chain) != 3 {
		t.Fatalf("chain: %v, %v", d, err)
	}
	expectCalls(t, res, 3, "chain")
	if _, err := v.Verify(ctx, ch.leaf, aud, vc.WithAncestors(ch.root, ch.middle)); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, res, 3, "chain again")
	if _, err := v.Verify(ctx, ch.leaf, aud); !errors.Is(err, vc.ErrChainIncomplete) {
		t.Fatalf("without ancestors: err = %v", err)
	}
	if _, err := v.Verify(ctx, ch.leaf, aud, vc.WithAncestors(ch.middle)); !errors.Is(err, vc.ErrChainIncomplete) {
		t.Fatalf("without the root: err = %v", err)
	}
	// Another root under the same ids: a different key, verified again.
	forged := f.chain3(t)
	if _, err := v.Verify(ctx, ch.leaf, aud, vc.WithAncestors(forged.root, ch.middle)); !errors.Is(err, vc.ErrChain) {
		t.Fatalf("another root: err = %v", err)
	}
	before := res.calls.Load()
	if _, err := v.Verify(ctx, ch.leaf, aud, vc.WithAncestors([]byte(" "+string(ch.root)+"\n"), ch.middle)); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, res, before, "ancestors with whitespace")

	// Ancestors that are not on the chain are ignored by the verification
	// but are part of the key: such a result is not stored, or one
	// credential would give keys without end.
	m := f.minter(t)
	junk := func(i int) []byte { return m.mint(1000 + i) } // off the chain: parsed, never verified
	one := issue(t, f.ed, f.vc11Claims(f.ed))              // names no parent
	for _, tc := range []struct {
		name string
		raw  []byte
		anc  func(i int) [][]byte
	}{
		{"a credential that names no parent", one, func(i int) [][]byte { return [][]byte{junk(i)} }},
		{"a chain and one more", ch.leaf, func(i int) [][]byte { return [][]byte{ch.root, ch.middle, junk(i)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lenBefore := v.Len()
			for i := range 3 {
				for range 2 { // the same junk twice: a second sighting would be stored
					before := res.calls.Load()
					if _, err := v.Verify(ctx, tc.raw, aud, vc.WithAncestors(tc.anc(i)...)); err != nil {
						t.Fatal(err)
					}
					if res.calls.Load() == before {
						t.Fatalf("junk %d: served from the cache", i)
					}
				}
			}
			if n := v.Len(); n != lenBefore {
				t.Errorf("Len %d -> %d: results with unused ancestors stored", lenBefore, n)
			}
		})
	}

	// A client that sends the whole chain, the credential itself
	// included, as its ancestors is served from the cache as before.
	for _, tc := range []struct {
		name string
		raw  []byte
		anc  [][]byte
	}{
		{"a chain, leaf included", ch.leaf, [][]byte{ch.root, ch.middle, ch.leaf}},
		{"a credential that names no parent, itself as its chain", one, [][]byte{append([]byte(" "), one...)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Verify(ctx, tc.raw, aud, vc.WithAncestors(tc.anc...)); err != nil {
				t.Fatal(err)
			}
			before := res.calls.Load()
			if _, err := v.Verify(ctx, tc.raw, aud, vc.WithAncestors(tc.anc...)); err != nil {
				t.Fatal(err)
			}
			expectCalls(t, res, before, "the same again")
		})
	}
}

// TestResultCacheLifetime: an entry is never served past the credential's
// exp, the cache TTL or, with a credentialStatus, the status list TTL; and
// NotBefore is checked on every hit.
func TestResultCacheLifetime(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	aud := vc.ForAudience(serverDID)
	raw := issue(t, f.ed, f.vc11Claims(f.ed)) // fixedNow-1m .. fixedNow+1h

	t.Run("exp", func(t *testing.T) {
		clock := &testClock{t: fixedNow}
		v, res, _ := f.cached(clock, 10, []Option{WithTTL(3 * time.Hour)})
		steps := []struct {
			at    time.Duration
			want  error
			calls int64
		}{
			{0, nil, 1},
			{time.Hour - time.Nanosecond, nil, 1}, // hit
			{time.Hour, nil, 2},                   // past exp: verified again, accepted within the skew, not stored
			{time.Hour + 30*time.Second, nil, 3},
			{time.Hour + time.Minute, vc.ErrExpired, 4},
		}
		for _, s := range steps {
			clock.mu.Lock()
			clock.t = fixedNow.Add(s.at)
			clock.mu.Unlock()
			_, err := v.Verify(ctx, raw, aud)
			if !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
				t.Fatalf("at %v: err = %v, want %v", s.at, err, s.want)
			}
			expectCalls(t, res, s.calls, "at "+s.at.String())
		}
		if n := v.Len(); n != 0 {
			t.Errorf("Len = %d after expiry", n)
		}
	})

	t.Run("ttl", func(t *testing.T) {
		clock := &testClock{t: fixedNow}
		v, res, _ := f.cached(clock, 10, []Option{WithTTL(10 * time.Minute)})
		for i, s := range []struct {
			step  time.Duration
			calls int64
		}{{0, 1}, {10*time.Minute - time.Second, 1}, {time.Second, 2}, {time.Minute, 2}} {
			clock.add(s.step)
			if _, err := v.Verify(ctx, raw, aud); err != nil {
				t.Fatal(err)
			}
			expectCalls(t, res, s.calls, "step "+strconv.Itoa(i))
		}
	})

	t.Run("default ttl", func(t *testing.T) {
		clock := &testClock{t: fixedNow}
		v, res, _ := f.cached(clock, 10, nil)
		if _, err := v.Verify(ctx, raw, aud); err != nil {
			t.Fatal(err)
		}
		clock.add(59 * time.Second)
		if _, err := v.Verify(ctx, raw, aud); err != nil {
			t.Fatal(err)
		}
		expectCalls(t, res, 1, "within 60s")
		clock.add(time.Second)
		if _, err := v.Verify(ctx, raw, aud); err != nil {
			t.Fatal(err)
		}
		expectCalls(t, res, 2, "at 60s")
	})

	t.Run("not before", func(t *testing.T) {
		// The clock steps back: NotBefore (issuanceDate, fixedNow-1m) is
		// checked with the 60s skew on a hit.
		clock := &testClock{t: fixedNow}
		v, res, _ := f.cached(clock, 10, nil)
		if _, err := v.Verify(ctx, raw, aud); err != nil {
			t.Fatal(err)
		}
		clock.add(-2 * time.Minute)
		if _, err := v.Verify(ctx, raw, aud); err != nil {
			t.Fatal(err)
		}
		expectCalls(t, res, 1, "at NotBefore-skew")
		clock.add(-time.Nanosecond)
		if _, err := v.Verify(ctx, raw, aud); !errors.Is(err, vc.ErrNotYetValid) {
			t.Fatalf("before NotBefore-skew: err = %v", err)
		}
		expectCalls(t, res, 2, "before NotBefore-skew")
		if n := v.Len(); n != 0 {
			t.Errorf("Len = %d: a failure keeps its entry", n)
		}
	})

	t.Run("status ttl", func(t *testing.T) {
		srv := newStatusServer(t)
		url := srv.url("/list")
		srv.set("/list", listJWT(t, f.ed, url, 42))
		c := f.delegation(f.ed, f.agent.did, "d-1", "", -time.Minute, time.Hour, "a")
		setPath(c, "vc.credentialStatus", statusEntry(url, 7))
		withStatus := issue(t, f.ed, c)

		clock := &testClock{t: fixedNow}
		v, res, _ := f.cached(clock, 10, []Option{WithTTL(10 * time.Minute)},
			vc.WithStatusLists(srv.srv.Client(), true), vc.WithStatusListTTL(30*time.Second))
		for _, r := range [][]byte{withStatus, raw} {
			if _, err := v.Verify(ctx, r, aud); err != nil {
				t.Fatal(err)
			}
		}
		expectCalls(t, res, 3, "first") // credential, list, other credential
		srv.set("/list", listJWT(t, f.ed, url, 7, 42))
		clock.add(29 * time.Second)
		if _, err := v.Verify(ctx, withStatus, aud); err != nil {
			t.Fatalf("within the status TTL: %v", err) // a revocation takes up to the TTL
		}
		expectCalls(t, res, 3, "within the status TTL")
		clock.add(time.Second)
		if _, err := v.Verify(ctx, withStatus, aud); !errors.Is(err, vc.ErrRevoked) {
			t.Fatalf("after the status TTL: err = %v", err)
		}
		if n := srv.hitCount("/list"); n != 2 {
			t.Errorf("list fetched %d times", n)
		}
		// Without a credentialStatus, only the cache TTL applies.
		before := res.calls.Load()
		if _, err := v.Verify(ctx, raw, aud); err != nil {
			t.Fatal(err)
		}
		expectCalls(t, res, before, "credential without status")
	})
}

// TestResultCacheNoExpiry: an entry of a credential without an end
// lasts the cache TTL, or less when the maximum lifetime ends it first.
func TestResultCacheNoExpiry(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.vc11Claims(f.ed)
	delete(c, "exp")
	setPath(c, "vc.expirationDate", del)
	raw := issue(t, f.ed, c) // issued at -1m, no end
	for _, tc := range []struct {
		name  string
		vopts []vc.Option
		copts []Option
		// after is when it is verified again: within the entry's life
		// (still cached) and past it.
		within, past time.Duration
	}{
		{"allowed: the cache TTL", []vc.Option{vc.WithAllowNoExpiry()}, []Option{WithTTL(time.Minute)}, 59 * time.Second, 61 * time.Second},
		{"allowed, maximum: its end", []vc.Option{vc.WithAllowNoExpiry(), vc.WithMaxLifetime(90 * time.Second)}, []Option{WithTTL(time.Hour)},
			29 * time.Second, 31 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &testClock{t: fixedNow}
			v, res, _ := f.cached(clock, 100, tc.copts, tc.vopts...)
			verify := func(calls int64, when string) {
				t.Helper()
				if _, err := v.Verify(ctx, raw, vc.ForAudience(serverDID)); err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				expectCalls(t, res, calls, when)
			}
			verify(1, "first")
			clock.add(tc.within)
			verify(1, "within the entry's life")
			clock.add(tc.past - tc.within)
			verify(2, "past the entry's life")
		})
	}
}

// TestResultCacheSingleflight: concurrent calls with one new token cost
// one verification.
func TestResultCacheSingleflight(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	aud := vc.ForAudience(serverDID)
	const n = 16

	// run calls Verify n times at once with the resolver held until all
	// have missed the cache, and returns the results.
	run := func(v *Cache, res *countingResolver, hc *hitCounter, raw []byte) ([]*vc.Delegation, []error) {
		res.gate = make(chan struct{})
		ds, errs := make([]*vc.Delegation, n), make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { ds[i], errs[i] = v.Verify(ctx, raw, aud) })
		}
		for hc.misses.Load() < n {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // from the observer into the flight
		close(res.gate)
		wg.Wait()
		return ds, errs
	}

	t.Run("good token", func(t *testing.T) {
		v, res, hc := f.cached(&testClock{t: fixedNow}, 100, nil)
		ds, errs := run(v, res, hc, issue(t, f.ed, f.vc11Claims(f.ed)))
		for i := range n {
			if errs[i] != nil || !reflect.DeepEqual(ds[i], ds[0]) || (i > 0 && ds[i] == ds[0]) {
				t.Fatalf("call %d: %v, %v", i, ds[i], errs[i])
			}
		}
		expectCalls(t, res, 1, "concurrent")
	})

	t.Run("bad token", func(t *testing.T) {
		v, res, hc := f.cached(&testClock{t: fixedNow}, 100, nil)
		forged := mint(t, f.stranger.priv, header(f.ed.kid), f.vc11Claims(f.ed))
		_, errs := run(v, res, hc, forged)
		for i, err := range errs {
			if !errors.Is(err, vc.ErrSignature) {
				t.Fatalf("call %d: err = %v", i, err)
			}
		}
		// Failures are not stored: only calls that were in flight together
		// share one.
		if c := res.calls.Load(); c > n/4 {
			t.Errorf("%d resolutions for %d concurrent calls", c, n)
		}
		if l := v.Len(); l != 0 {
			t.Errorf("Len = %d after failures", l)
		}
	})

	// A leader whose client left: the follower verifies on its own,
	// whatever error the resolver made of the cancellation.
	for _, fetchCancel := range []bool{false, true} {
		t.Run(fmt.Sprintf("leader cancelled/fetch error %v", fetchCancel), func(t *testing.T) {
			leaderCancelled(t, f, fetchCancel)
		})
	}
}

func leaderCancelled(t *testing.T, f *fixture, fetchCancel bool) {
	ctx := context.Background()
	aud := vc.ForAudience(serverDID)
	v, res, hc := f.cached(&testClock{t: fixedNow}, 100, nil)
	res.fetchCancel = fetchCancel
	raw := issue(t, f.ed, f.vc11Claims(f.ed))
	res.gate = make(chan struct{})
	lctx, cancel := context.WithCancel(ctx)
	var leaderErr error
	var wg sync.WaitGroup
	wg.Go(func() { _, leaderErr = v.Verify(lctx, raw, aud) })
	for res.calls.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	var follower *vc.Delegation
	var followerErr error
	wg.Go(func() { follower, followerErr = v.Verify(ctx, raw, aud) })
	for hc.misses.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	cancel()
	// The follower resolves on its own; without, it failed with the
	// leader's error (bounded, so that the test fails rather than hangs).
	for deadline := time.Now().Add(5 * time.Second); res.calls.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(res.gate)
	wg.Wait()
	if !errors.Is(leaderErr, context.Canceled) && !errors.Is(leaderErr, didresolver.ErrFetch) {
		t.Errorf("leader: err = %v", leaderErr)
	}
	if followerErr != nil || follower == nil {
		t.Errorf("follower: %v", followerErr)
	}
}

// TestResultCachePresentations: presentations are never served from the
// cache, and one in flight is not shared.
func TestResultCachePresentations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	aud := vc.ForAudience(serverDID)
	leaf := issue(t, f.ed, f.delegation(f.ed, f.agent.did, "d-1", "", -time.Minute, time.Hour, "a"))

	t.Run("nonce", func(t *testing.T) {
		v, _, hc := f.cached(&testClock{t: fixedNow}, 100, nil)
		vp := vpJWT(t, f.agent, [][]byte{leaf}, nil)
		nonce := vc.WithPresentationNonce(nonceOnce())
		if d, err := v.Verify(ctx, vp, aud, nonce); err != nil || !d.Presented {
			t.Fatalf("%v, %v", d, err)
		}
		if _, err := v.Verify(ctx, vp, aud, nonce); !errors.Is(err, vc.ErrPresentation) {
			t.Fatalf("nonce reused: err = %v", err)
		}
		if _, err := v.Verify(ctx, leaf, aud, vc.RequirePresentation()); !errors.Is(err, vc.ErrPresentationRequired) {
			t.Fatalf("RequirePresentation: err = %v", err)
		}
		if hc.hits.Load()+hc.misses.Load() != 0 || v.Len() != 0 {
			t.Errorf("cache consulted: %v, Len %d", hc, v.Len())
		}
	})

	t.Run("RequirePresentation after a cached credential", func(t *testing.T) {
		v, _, _ := f.cached(&testClock{t: fixedNow}, 100, nil)
		if _, err := v.Verify(ctx, leaf, aud); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(ctx, leaf, aud, vc.RequirePresentation()); !errors.Is(err, vc.ErrPresentationRequired) {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("replay guard", func(t *testing.T) {
		v, res, hc := f.cached(&testClock{t: fixedNow}, 100, nil, vc.WithReplayGuard(&memGuard{}))
		vp := vpJWT(t, f.agent, [][]byte{leaf}, nil)
		if _, err := v.Verify(ctx, vp, aud); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(ctx, vp, aud); !errors.Is(err, vc.ErrReplay) {
			t.Fatalf("replayed: err = %v", err)
		}
		if hc.hits.Load() != 0 || v.Len() != 0 {
			t.Errorf("%v, Len %d", hc, v.Len())
		}

		// n at once: one verification in flight, then each of the others
		// checks its own, and exactly one gets through the guard.
		const n = 8
		vp2 := vpJWT(t, f.agent, [][]byte{leaf}, func(c map[string]any) { c["jti"] = "urn:uuid:vp-2" })
		res.gate = make(chan struct{})
		misses := hc.misses.Load()
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, errs[i] = v.Verify(ctx, vp2, aud) })
		}
		for hc.misses.Load() < misses+n {
			time.Sleep(time.Millisecond)
		}
		close(res.gate)
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, vc.ErrReplay):
				t.Errorf("err = %v", err)
			}
		}
		if ok != 1 {
			t.Errorf("%d of %d concurrent presentations accepted", ok, n)
		}
	})
}

// TestResultCacheCopies: no caller can change what the next one gets.
func TestResultCacheCopies(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ch := f.chain3(t)
	v, res, _ := f.cached(&testClock{t: fixedNow}, 100, nil)
	opts := []vc.CheckOption{vc.ForAudience(serverDID), vc.WithAncestors(ch.root, ch.middle)}
	first, err := v.Verify(ctx, ch.leaf, opts...)
	if err != nil {
		t.Fatal(err)
	}
	want := first.Clone()
	if len(want.Scopes) == 0 || len(want.Audience) == 0 || len(want.Chain) != 3 {
		t.Fatalf("fixture: %+v", want)
	}
	spoil := func(d *vc.Delegation) {
		d.Scopes[0] = "admin"
		d.Audience[0] = "did:web:evil.example"
		d.Chain[0] = "forged"
		// Appending to one slice must not write over the next.
		d.Scopes = append(d.Scopes, "more")
		d.Audience = append(d.Audience, "more")
		d.AgentDID = "did:key:evil"
		d.Hash[0] ^= 0xff
	}
	spoil(first)
	for i := range 3 {
		d, err := v.Verify(ctx, ch.leaf, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(d, want) {
			t.Fatalf("hit %d = %+v, want %+v", i, d, want)
		}
		spoil(d)
		if d.Audience[0] != "did:web:evil.example" || d.Chain[0] != "forged" || d.Audience[len(d.Audience)-1] != "more" {
			t.Fatalf("appending to Scopes changed Audience or Chain: %+v", d)
		}
	}
	expectCalls(t, res, 3, "hits")
}
