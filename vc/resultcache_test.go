package vc

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// countingResolver counts resolutions (one per credential or presentation
// verified) of a real resolver; with a gate, each waits for it to close.
type countingResolver struct {
	res   didresolver.Resolver
	calls atomic.Int64
	gate  chan struct{}
	// fetchCancel: a wait cut short fails as didresolver.Cache's fetch
	// does, ErrFetch first.
	fetchCancel bool
}

func (r *countingResolver) Resolve(ctx context.Context, did string) (*didresolver.Document, error) {
	r.calls.Add(1)
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			if r.fetchCancel {
				return nil, fmt.Errorf("%w: %w", didresolver.ErrFetch, ctx.Err())
			}
			return nil, ctx.Err()
		}
	}
	return r.res.Resolve(ctx, did)
}

// hitCounter is a WithCacheObserver.
type hitCounter struct{ hits, misses atomic.Int64 }

func (h *hitCounter) observe(hit bool) {
	if hit {
		h.hits.Add(1)
	} else {
		h.misses.Add(1)
	}
}

func (h *hitCounter) String() string {
	return fmt.Sprintf("%d hits, %d misses", h.hits.Load(), h.misses.Load())
}

// cachedVerifier is a Verifier with a result cache of maxEntries over a
// counting resolver of the fixture's documents, on clock.
func (f *fixture) cachedVerifier(clock *testClock, maxEntries int, opts ...Option) (*Verifier, *countingResolver, *hitCounter) {
	res := &countingResolver{res: f.res}
	hc := &hitCounter{}
	all := []Option{WithClock(clock.now), WithResultCache(maxEntries), WithCacheObserver(hc.observe)}
	return NewVerifier(res, append(all, opts...)...), res, hc
}

// expectCalls fails unless the resolver was called want times in all.
func expectCalls(t *testing.T, r *countingResolver, want int64, when string) {
	t.Helper()
	if got := r.calls.Load(); got != want {
		t.Fatalf("%s: %d resolutions, want %d", when, got, want)
	}
}

func TestResultCacheOff(t *testing.T) {
	f := newFixture(t)
	if v := f.verifier(); v.results != nil {
		t.Error("cache on by default")
	}
	if v := f.verifier(WithResultCache(0)); v.results != nil {
		t.Error("WithResultCache(0) turned the cache on")
	}
	if v := f.verifier(WithResultCache(-5)); v.results != nil {
		t.Error("WithResultCache(-5) turned the cache on")
	}
}

func TestResultCacheHit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	creds := map[string][]byte{
		"vc-jwt":      mint(t, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed)),
		"json":        signEd25519JCS(t, f.ed, f.jsonCredential(f.ed), false),
		"vc20":        mint(t, f.p256.priv, map[string]any{"alg": "ES256", "typ": "vc+jwt", "kid": f.p256.kid}, f.vc20Payload(f.p256)),
		"eddsa-jcs22": signEddsaJCS2022(t, f.ed, f.jsonCredential(f.ed), nil),
	}
	for name, raw := range creds {
		t.Run(name, func(t *testing.T) {
			v, res, hc := f.cachedVerifier(&testClock{t: fixedNow}, 100)
			want, err := v.Verify(ctx, raw, ForAudience(serverDID))
			if err != nil {
				t.Fatal(err)
			}
			expectCalls(t, res, 1, "first")
			for _, r := range [][]byte{raw, append(append([]byte(" \n"), raw...), '\t')} {
				got, err := v.Verify(ctx, r, ForAudience(serverDID))
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
			plain, err := f.verifier().Verify(ctx, raw, ForAudience(serverDID))
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
	raw := mint(t, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed)) // aud serverDID; greeting:read, greeting:write
	const other = "did:web:other.example.com"
	v, res, _ := f.cachedVerifier(&testClock{t: fixedNow}, 100)

	steps := []struct {
		name  string
		opts  []CheckOption
		want  error
		calls int64 // total resolutions after the step
	}{
		{"audience A", []CheckOption{ForAudience(serverDID)}, nil, 1},
		{"audience A again", []CheckOption{ForAudience(serverDID)}, nil, 1},
		{"audience B", []CheckOption{ForAudience(other)}, ErrAudience, 2},
		{"audience B again", []CheckOption{ForAudience(other)}, ErrAudience, 3},
		{"no audience", nil, ErrAudience, 4},
		{"A and B", []CheckOption{ForAudience(other, serverDID)}, nil, 5},
		{"one scope", []CheckOption{ForAudience(serverDID), RequireScopes("greeting:read")}, nil, 6},
		{"one scope again", []CheckOption{ForAudience(serverDID), RequireScopes("greeting:read")}, nil, 6},
		{"more scopes", []CheckOption{ForAudience(serverDID), RequireScopes("greeting:read", "admin")}, ErrMissingScope, 7},
		{"other scope", []CheckOption{ForAudience(serverDID), RequireScopes("admin")}, ErrMissingScope, 8},
		{"scopes split over options", []CheckOption{ForAudience(serverDID), RequireScopes("greeting:read"), RequireScopes("admin")}, ErrMissingScope, 9},
		{"audience A still cached", []CheckOption{ForAudience(serverDID)}, nil, 9},
		{"require audience", []CheckOption{ForAudience(serverDID), RequireAudience()}, nil, 10},
		{"require audience again", []CheckOption{ForAudience(serverDID), RequireAudience()}, nil, 10},
	}
	for _, s := range steps {
		_, err := v.Verify(ctx, raw, s.opts...)
		if !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
			t.Fatalf("%s: err = %v, want %v", s.name, err, s.want)
		}
		expectCalls(t, res, s.calls, s.name)
	}

	// RequireAudience against a credential naming none.
	noAud := f.vc11Claims(f.ed)
	delete(noAud, "aud")
	setPath(noAud, "vc.credentialSubject.delegation.constraints.audience", del)
	bare := mint(t, f.ed.priv, header("EdDSA", f.ed.kid), noAud)
	if _, err := v.Verify(ctx, bare, ForAudience(serverDID)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, bare, ForAudience(serverDID), RequireAudience()); !errors.Is(err, ErrAudience) {
		t.Fatalf("RequireAudience after a cached success: err = %v", err)
	}
}

// TestResultCacheAncestors: the ancestors given are part of the key.
func TestResultCacheAncestors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ch := f.chain3(t, nil)
	v, res, _ := f.cachedVerifier(&testClock{t: fixedNow}, 100, WithTrustedIssuers(f.ed.did))
	aud := ForAudience(serverDID)
	d, err := v.Verify(ctx, ch.leaf, aud, WithAncestors(ch.root, ch.middle))
	if err != nil || len(d.Chain) != 3 {
		t.Fatalf("chain: %v, %v", d, err)
	}
	expectCalls(t, res, 3, "chain")
	if _, err := v.Verify(ctx, ch.leaf, aud, WithAncestors(ch.root, ch.middle)); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, res, 3, "chain again")
	if _, err := v.Verify(ctx, ch.leaf, aud); !errors.Is(err, ErrChainIncomplete) {
		t.Fatalf("without ancestors: err = %v", err)
	}
	if _, err := v.Verify(ctx, ch.leaf, aud, WithAncestors(ch.middle)); !errors.Is(err, ErrChainIncomplete) {
		t.Fatalf("without the root: err = %v", err)
	}
	// Another root under the same ids: a different key, verified again.
	forged := f.chain3(t, nil)
	if _, err := v.Verify(ctx, ch.leaf, aud, WithAncestors(forged.root, ch.middle)); !errors.Is(err, ErrChain) {
		t.Fatalf("another root: err = %v", err)
	}
	before := res.calls.Load()
	if _, err := v.Verify(ctx, ch.leaf, aud, WithAncestors([]byte(" "+string(ch.root)+"\n"), ch.middle)); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, res, before, "ancestors with whitespace")

	// Ancestors that are not on the chain are ignored by the verification
	// but are part of the key: such a result is not stored, or one
	// credential would give keys without end.
	m := f.minter(t)
	junk := func(i int) []byte { return m.mint(1000 + i) }                   // off the chain: parsed, never verified
	one := mint(t, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed)) // names no parent
	for _, tc := range []struct {
		name string
		raw  []byte
		anc  func(i int) [][]byte
	}{
		{"a credential that names no parent", one, func(i int) [][]byte { return [][]byte{junk(i)} }},
		{"a chain and one more", ch.leaf, func(i int) [][]byte { return [][]byte{ch.root, ch.middle, junk(i)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lenBefore := v.results.Len()
			for i := range 3 {
				for range 2 { // the same junk twice: a second sighting would be stored
					before := res.calls.Load()
					if _, err := v.Verify(ctx, tc.raw, aud, WithAncestors(tc.anc(i)...)); err != nil {
						t.Fatal(err)
					}
					if res.calls.Load() == before {
						t.Fatalf("junk %d: served from the cache", i)
					}
				}
			}
			if n := v.results.Len(); n != lenBefore {
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
			if _, err := v.Verify(ctx, tc.raw, aud, WithAncestors(tc.anc...)); err != nil {
				t.Fatal(err)
			}
			before := res.calls.Load()
			if _, err := v.Verify(ctx, tc.raw, aud, WithAncestors(tc.anc...)); err != nil {
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
	aud := ForAudience(serverDID)
	raw := mint(t, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed)) // fixedNow-1m .. fixedNow+1h

	t.Run("exp", func(t *testing.T) {
		clock := &testClock{t: fixedNow}
		v, res, _ := f.cachedVerifier(clock, 10, WithResultCacheTTL(3*time.Hour))
		steps := []struct {
			at    time.Duration
			want  error
			calls int64
		}{
			{0, nil, 1},
			{time.Hour - time.Nanosecond, nil, 1}, // hit
			{time.Hour, nil, 2},                   // past exp: verified again, accepted within the skew, not stored
			{time.Hour + 30*time.Second, nil, 3},
			{time.Hour + time.Minute, ErrExpired, 4},
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
		if n := v.results.Len(); n != 0 {
			t.Errorf("Len = %d after expiry", n)
		}
	})

	t.Run("ttl", func(t *testing.T) {
		clock := &testClock{t: fixedNow}
		v, res, _ := f.cachedVerifier(clock, 10, WithResultCacheTTL(10*time.Minute))
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
		v, res, _ := f.cachedVerifier(clock, 10)
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
		v, res, _ := f.cachedVerifier(clock, 10)
		if _, err := v.Verify(ctx, raw, aud); err != nil {
			t.Fatal(err)
		}
		clock.add(-2 * time.Minute)
		if _, err := v.Verify(ctx, raw, aud); err != nil {
			t.Fatal(err)
		}
		expectCalls(t, res, 1, "at NotBefore-skew")
		clock.add(-time.Nanosecond)
		if _, err := v.Verify(ctx, raw, aud); !errors.Is(err, ErrNotYetValid) {
			t.Fatalf("before NotBefore-skew: err = %v", err)
		}
		expectCalls(t, res, 2, "before NotBefore-skew")
		if n := v.results.Len(); n != 0 {
			t.Errorf("Len = %d: a failure keeps its entry", n)
		}
	})

	t.Run("status ttl", func(t *testing.T) {
		srv := newStatusServer(t)
		url := statusURL("/list")
		srv.set("/list", signEd25519JCS(t, f.ed, listCred(t, f.ed, url, "revocation", false, 42), false))
		c := f.delegationVC(f.ed, f.agent.did, "d-1", "", "a")
		c["credentialStatus"] = statusEntryFor(url, "revocation", false, "7")
		withStatus := signCred(t, f.ed, c, false)

		clock := &testClock{t: fixedNow}
		v, res, _ := f.cachedVerifier(clock, 10, WithStatusLists(srv.client(), true),
			WithStatusListTTL(30*time.Second), WithResultCacheTTL(10*time.Minute))
		for _, r := range [][]byte{withStatus, raw} {
			if _, err := v.Verify(ctx, r, aud); err != nil {
				t.Fatal(err)
			}
		}
		expectCalls(t, res, 3, "first") // credential, list, other credential
		srv.set("/list", signEd25519JCS(t, f.ed, listCred(t, f.ed, url, "revocation", false, 7, 42), false))
		clock.add(29 * time.Second)
		if _, err := v.Verify(ctx, withStatus, aud); err != nil {
			t.Fatalf("within the status TTL: %v", err) // a revocation takes up to the TTL
		}
		expectCalls(t, res, 3, "within the status TTL")
		clock.add(time.Second)
		if _, err := v.Verify(ctx, withStatus, aud); !errors.Is(err, ErrRevoked) {
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

// TestResultCacheSingleflight: concurrent calls with one new token cost
// one verification.
func TestResultCacheSingleflight(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	aud := ForAudience(serverDID)
	const n = 16

	// run calls Verify n times at once with the resolver held until all
	// have missed the cache, and returns the results.
	run := func(v *Verifier, res *countingResolver, hc *hitCounter, raw []byte) ([]*Delegation, []error) {
		res.gate = make(chan struct{})
		ds, errs := make([]*Delegation, n), make([]error, n)
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
		v, res, hc := f.cachedVerifier(&testClock{t: fixedNow}, 100)
		ds, errs := run(v, res, hc, mint(t, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed)))
		for i := range n {
			if errs[i] != nil || !reflect.DeepEqual(ds[i], ds[0]) || (i > 0 && ds[i] == ds[0]) {
				t.Fatalf("call %d: %v, %v", i, ds[i], errs[i])
			}
		}
		expectCalls(t, res, 1, "concurrent")
	})

	t.Run("bad token", func(t *testing.T) {
		v, res, hc := f.cachedVerifier(&testClock{t: fixedNow}, 100)
		forged := mint(t, f.stranger.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed))
		_, errs := run(v, res, hc, forged)
		for i, err := range errs {
			if !errors.Is(err, ErrSignature) {
				t.Fatalf("call %d: err = %v", i, err)
			}
		}
		// Failures are not stored: only calls that were in flight together
		// share one.
		if c := res.calls.Load(); c > n/4 {
			t.Errorf("%d resolutions for %d concurrent calls", c, n)
		}
		if l := v.results.Len(); l != 0 {
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
	aud := ForAudience(serverDID)
	v, res, hc := f.cachedVerifier(&testClock{t: fixedNow}, 100)
	res.fetchCancel = fetchCancel
	raw := mint(t, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed))
	res.gate = make(chan struct{})
	lctx, cancel := context.WithCancel(ctx)
	var leaderErr error
	var wg sync.WaitGroup
	wg.Go(func() { _, leaderErr = v.Verify(lctx, raw, aud) })
	for res.calls.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	var follower *Delegation
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
	aud := ForAudience(serverDID)
	leaf := signCred(t, f.ed, f.delegationVC(f.ed, f.agent.did, "d-1", "", "a"), true)

	t.Run("nonce", func(t *testing.T) {
		v, _, hc := f.cachedVerifier(&testClock{t: fixedNow}, 100)
		vp := vpJWT(t, f.agent, [][]byte{leaf}, nil)
		nonce := WithPresentationNonce(nonceOnce())
		if d, err := v.Verify(ctx, vp, aud, nonce); err != nil || !d.Presented {
			t.Fatalf("%v, %v", d, err)
		}
		if _, err := v.Verify(ctx, vp, aud, nonce); !errors.Is(err, ErrPresentation) {
			t.Fatalf("nonce reused: err = %v", err)
		}
		if _, err := v.Verify(ctx, leaf, aud, RequirePresentation()); !errors.Is(err, ErrPresentationRequired) {
			t.Fatalf("RequirePresentation: err = %v", err)
		}
		if hc.hits.Load()+hc.misses.Load() != 0 || v.results.Len() != 0 {
			t.Errorf("cache consulted: %v, Len %d", hc, v.results.Len())
		}
	})

	t.Run("RequirePresentation after a cached credential", func(t *testing.T) {
		v, _, _ := f.cachedVerifier(&testClock{t: fixedNow}, 100)
		if _, err := v.Verify(ctx, leaf, aud); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(ctx, leaf, aud, RequirePresentation()); !errors.Is(err, ErrPresentationRequired) {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("replay guard", func(t *testing.T) {
		v, res, hc := f.cachedVerifier(&testClock{t: fixedNow}, 100, WithReplayGuard(&memGuard{}))
		vp := vpJWT(t, f.agent, [][]byte{leaf}, nil)
		if _, err := v.Verify(ctx, vp, aud); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(ctx, vp, aud); !errors.Is(err, ErrReplay) {
			t.Fatalf("replayed: err = %v", err)
		}
		if hc.hits.Load() != 0 || v.results.Len() != 0 {
			t.Errorf("%v, Len %d", hc, v.results.Len())
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
			case !errors.Is(err, ErrReplay):
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
	ch := f.chain3(t, nil)
	v, res, _ := f.cachedVerifier(&testClock{t: fixedNow}, 100)
	opts := []CheckOption{ForAudience(serverDID), WithAncestors(ch.root, ch.middle)}
	first, err := v.Verify(ctx, ch.leaf, opts...)
	if err != nil {
		t.Fatal(err)
	}
	want := cloneDelegation(first)
	if len(want.Scopes) == 0 || len(want.Audience) == 0 || len(want.Chain) != 3 {
		t.Fatalf("fixture: %+v", want)
	}
	spoil := func(d *Delegation) {
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

// TestResultCacheKeyCoversChecks: the key is written for these rules; a
// new one must be added to keyOf (or bypass the cache) and here.
func TestResultCacheKeyCoversChecks(t *testing.T) {
	var names []string
	typ := reflect.TypeFor[checks]()
	for i := range typ.NumField() {
		names = append(names, typ.Field(i).Name)
	}
	got := strings.Join(names, " ")
	const want = "audiences requireAudience requiredScopes ancestors nonce requirePresentation"
	if got != want {
		t.Errorf("checks fields %q, keyOf covers %q", got, want)
	}

	// Lists are length-prefixed: moving a value from one list to the
	// other, or splitting it, changes the key.
	f := newFixture(t)
	v := f.verifier(WithResultCache(10))
	raw := []byte("x")
	keys := map[resultKey]string{}
	for name, c := range map[string]checks{
		"empty":          {},
		"aud ab":         {audiences: []string{"ab"}},
		"aud a b":        {audiences: []string{"a", "b"}},
		"scope ab":       {requiredScopes: []string{"ab"}},
		"aud a scope b":  {audiences: []string{"a"}, requiredScopes: []string{"b"}},
		"require aud":    {requireAudience: true},
		"ancestor x":     {ancestors: [][]byte{[]byte("x")}},
		"ancestor x, y":  {ancestors: [][]byte{[]byte("x"), []byte("y")}},
		"ancestor empty": {ancestors: [][]byte{{}}},
	} {
		k, ok := keyOf(v, raw, &c)
		if !ok {
			t.Fatalf("%s: bypassed", name)
		}
		if prev, dup := keys[k]; dup {
			t.Errorf("%s and %s share a key", name, prev)
		}
		keys[k] = name
	}
	// The credential and the rules are in one hash: moving bytes between
	// the last rule and the credential changes the key too, as does the
	// credential alone.
	for name, kc := range map[string]struct {
		raw string
		c   checks
	}{
		"scope a, credential bz":  {"bz", checks{requiredScopes: []string{"a"}}},
		"scope ab, credential z":  {"z", checks{requiredScopes: []string{"ab"}}},
		"no rules, credential y":  {"y", checks{}},
		"no rules, credential xx": {"xx", checks{}},
	} {
		k, ok := keyOf(v, []byte(kc.raw), &kc.c)
		if !ok {
			t.Fatalf("%s: bypassed", name)
		}
		if prev, dup := keys[k]; dup {
			t.Errorf("%s and %s share a key", name, prev)
		}
		keys[k] = name
	}
	for name, c := range map[string]checks{
		"nonce":                {nonce: func(string, string) error { return nil }},
		"require presentation": {requirePresentation: true},
		"too many ancestors":   {ancestors: make([][]byte, maxPooled+1)},
		"large ancestor":       {ancestors: [][]byte{make([]byte, defaultMaxSize+1)}},
	} {
		if _, ok := keyOf(v, raw, &c); ok {
			t.Errorf("%s: not bypassed", name)
		}
	}
}

// BenchmarkVerifyCachedHit: a credential already verified under the same
// rules, with the rules built per call as the Caddy handler does.
func BenchmarkVerifyCachedHit(b *testing.B) {
	f := newFixture(b)
	raw := mint(b, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed))
	cache := didresolver.NewCache(f.res, didresolver.WithCacheClock(func() time.Time { return fixedNow }))
	var hits atomic.Int64
	v := NewVerifier(cache, WithClock(func() time.Time { return fixedNow }), WithResultCache(10000),
		WithCacheObserver(func(hit bool) {
			if hit {
				hits.Add(1)
			}
		}))
	ctx := context.Background()
	if _, err := v.Verify(ctx, raw, ForAudience(serverDID)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, raw, ForAudience(serverDID)); err != nil {
			b.Fatal(err)
		}
	}
	if hits.Load() == 0 {
		b.Fatal("no hits")
	}
}

// BenchmarkResultCacheKey: the key of a hit (one SHA-256 over the rules and
// the token), the floor of BenchmarkVerifyCachedHit.
func BenchmarkResultCacheKey(b *testing.B) {
	f := newFixture(b)
	raw := mint(b, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed))
	v := f.verifier(WithResultCache(10))
	c := checks{audiences: []string{serverDID}}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := keyOf(v, raw, &c); !ok {
			b.Fatal("bypassed")
		}
	}
}

// BenchmarkVerifyCacheMissDistinct: every call a credential not in the
// cache (4096 pre-minted, cycled through a cache of 1000: each is evicted
// before it comes round again).
func BenchmarkVerifyCacheMissDistinct(b *testing.B) {
	f := newFixture(b)
	m := f.minter(b)
	creds := make([][]byte, 4096)
	for i := range creds {
		creds[i] = m.mint(i)
	}
	cache := didresolver.NewCache(f.res, didresolver.WithCacheClock(func() time.Time { return fixedNow }))
	var misses atomic.Int64
	v := NewVerifier(cache, WithClock(func() time.Time { return fixedNow }), WithResultCache(1000),
		WithCacheObserver(func(hit bool) {
			if !hit {
				misses.Add(1)
			}
		}))
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := v.Verify(ctx, creds[i%len(creds)], ForAudience(serverDID)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(misses.Load())/float64(i), "misses/op")
}

// BenchmarkCloneDelegation: what a hit pays for its own copy.
func BenchmarkCloneDelegation(b *testing.B) {
	d := &Delegation{
		AgentDID: "did:key:z6MkAgent", UserDID: "did:key:z6MkUser", Issuer: "did:key:z6MkIssuer",
		Scopes:   []string{"greeting:read", "greeting:write", "files:read"},
		Audience: []string{serverDID},
		Chain:    []string{"urn:uuid:3f0c0000-0000-4000-8000-000000000001"},
	}
	b.ReportAllocs()
	for b.Loop() {
		cloneSink = cloneDelegation(d)
	}
}

var cloneSink *Delegation

// keyOf is the cache key of the trimmed credential raw under c, as the
// cache computes it (keyInput, then keySums), and false when the call
// bypasses the cache.
func keyOf(v *Verifier, raw []byte, c *checks) (resultKey, bool) {
	in, ok := v.keyInput(raw, c, nil)
	if !ok {
		return resultKey{}, false
	}
	key, _ := keySums(in, len(raw))
	return key, true
}
