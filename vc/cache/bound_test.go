package cache

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/memstat"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The cache under many distinct credentials: its bounds, and the memory it
// takes (TestResultCacheMemory, for BENCHMARKS.md).

// vcMinter mints distinct EdDSA VC-JWTs quickly: the claims are encoded
// once and only the credential id changes.
type vcMinter struct {
	priv   ed25519.PrivateKey
	prefix string // base64url header and "."
	claims []byte // with idMarker where the id goes
	// idDigits is how many hex digits end the id: 12, or more for the
	// outsized credentials of a memory flood (the id is written three
	// times: jti, vc.id and delegation.id).
	idDigits int
}

func (f *fixture) minter(t testing.TB) *vcMinter {
	claims := mustJSON(t, f.vc11Claims(f.ed))
	if bytes.Count(claims, []byte(idMarker)) != 3 {
		t.Fatal("fixture id not found")
	}
	return &vcMinter{
		priv:     f.ed.priv,
		prefix:   b64(mustJSON(t, header(f.ed.kid))) + ".",
		claims:   claims,
		idDigits: 12,
	}
}

// mint returns the i-th credential; ids differ in their last digits.
func (m *vcMinter) mint(i int) []byte {
	id := fmt.Sprintf("3f0c0000-0000-4000-8000-%0*x", m.idDigits, i)
	payload := bytes.ReplaceAll(m.claims, []byte(idMarker), []byte(id))
	enc := base64.RawURLEncoding
	tok := make([]byte, 0, len(m.prefix)+enc.EncodedLen(len(payload))+1+86)
	tok = append(tok, m.prefix...)
	tok = enc.AppendEncode(tok, payload)
	sig := ed25519.Sign(m.priv, tok)
	tok = append(tok, '.')
	return enc.AppendEncode(tok, sig)
}

// TestResultCacheBound: many distinct credentials, the cache stays within
// maxEntries; a credential in use stays cached while one-offs pass
// through, and a one-off is stored once it is used again.
func TestResultCacheBound(t *testing.T) {
	n, maxEntries := 50000, 1000
	if raceEnabled || testing.Short() {
		n, maxEntries = 1500, 256 // the race detector slows Ed25519 down tenfold
	}
	f := newFixture(t)
	m := f.minter(t)
	creds := make([][]byte, n)
	for i := range creds {
		creds[i] = m.mint(i)
	}
	hot := m.mint(n)
	v, res, hc := f.cached(&testClock{t: fixedNow}, maxEntries, nil)
	ctx := context.Background()
	aud := vc.ForAudience(serverDID)
	if _, err := v.Verify(ctx, hot, aud); err != nil {
		t.Fatal(err)
	}
	for i, raw := range creds {
		if _, err := v.Verify(ctx, raw, aud); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := v.Verify(ctx, hot, aud); err != nil {
				t.Fatal(err)
			}
		}
		if i%1000 == 999 {
			if l := v.Len(); l > maxEntries {
				t.Fatalf("after %d: Len = %d > %d", i+1, l, maxEntries)
			}
		}
	}
	if l := v.Len(); l > maxEntries || l < maxEntries*9/10 {
		t.Errorf("Len = %d, max %d", l, maxEntries)
	}
	expectCalls(t, res, int64(n+1), "distinct credentials")
	if h := hc.hits.Load(); h != int64(n/10) {
		t.Errorf("hot credential: %d hits of %d", h, n/10)
	}
	// The cache filled up with the first ones; the later ones came to a
	// full cache once each and were not stored (admission.go). The last
	// one is stored the second time it is verified, and hits the third.
	before := res.calls.Load()
	if _, err := v.Verify(ctx, creds[n-1], aud); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, res, before+1, "most recent credential, a second time: verified")
	if _, err := v.Verify(ctx, creds[n-1], aud); err != nil {
		t.Fatal(err)
	}
	expectCalls(t, res, before+1, "most recent credential, a third time: stored the second")
}

// cacheMemory is what measureCacheMemory reports.
type cacheMemory struct {
	n, entries          int
	credBytes           int    // the size of one credential
	heapInuse, heapLive uint64 // after a GC, less the baseline
	rss                 uint64 // VmRSS, whole process
	elapsed             time.Duration
}

// measureCacheMemory runs n distinct credentials, minted on the fly by
// workers goroutines, through a vc.Verifier with a cache of maxEntries, and
// reports the heap (after a GC, less what it was before) and RSS. Their
// ids end in idDigits hex digits (12: the usual size; more make outsized
// credentials).
func measureCacheMemory(tb testing.TB, n, maxEntries, idDigits, workers int, opts ...Option) cacheMemory {
	f := newFixture(tb)
	m := f.minter(tb)
	m.idDigits = idDigits
	res := didresolver.NewCache(f.res, didresolver.WithCacheClock(func() time.Time { return fixedNow }))
	v := New(vc.NewVerifier(res, vc.WithClock(func() time.Time { return fixedNow })), maxEntries, opts...)
	ctx := context.Background()
	aud := vc.ForAudience(serverDID)

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := v.Verify(ctx, m.mint(i), aud); err != nil {
					errs <- err
					return
				}
				if i%200000 == 199999 {
					tb.Logf("%d credentials, %d cached, %v", i+1, v.Len(), time.Since(start).Round(time.Second))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatal(err)
	}
	out := cacheMemory{n: n, entries: v.Len(), credBytes: len(m.mint(0)), elapsed: time.Since(start), rss: memstat.RSS()}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	out.heapInuse = after.HeapInuse - min(before.HeapInuse, after.HeapInuse)
	out.heapLive = after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
	runtime.KeepAlive(v)
	return out
}

// TestResultCacheMemory: MCPI_MEMTEST=1 runs a million distinct
// credentials (MCPI_MEMTEST_N) through a cache of 10000
// (MCPI_MEMTEST_MAX) and reports the heap and RSS, for BENCHMARKS.md.
// MCPI_MEMTEST_ID sets how many hex digits end each id (default 12; 13000
// makes credentials of about 54 KB, a flood of long ids).
func TestResultCacheMemory(t *testing.T) {
	if os.Getenv("MCPI_MEMTEST") != "1" {
		t.Skip("a measurement for BENCHMARKS.md (a million credentials, about a minute), not a check: set MCPI_MEMTEST=1 to run it")
	}
	envInt := func(name string, def int) int {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q", name, s)
			}
			return n
		}
		return def
	}
	n, maxEntries := envInt("MCPI_MEMTEST_N", 1_000_000), envInt("MCPI_MEMTEST_MAX", 10000)
	r := measureCacheMemory(t, n, maxEntries, envInt("MCPI_MEMTEST_ID", 12), runtime.GOMAXPROCS(0))
	if r.entries > maxEntries {
		t.Errorf("Len = %d > %d", r.entries, maxEntries)
	}
	t.Logf("%d distinct credentials of %d B in %v (%.0f/s), cache max %d: %d entries; heap in use +%.1f MiB, live heap +%.1f MiB (%.0f B/entry); RSS %.1f MiB",
		r.n, r.credBytes, r.elapsed.Round(time.Second), float64(r.n)/r.elapsed.Seconds(), maxEntries, r.entries,
		float64(r.heapInuse)/(1<<20), float64(r.heapLive)/(1<<20), float64(r.heapLive)/float64(max(r.entries, 1)),
		float64(r.rss)/(1<<20))
}
