package cache

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// putID stores, under the key of name, a delegation whose only non-empty
// string is an id of idLen bytes (its accounted size is then exactly
// resultEntrySize(idLen, 0)).
func putID(rc *Cache, name string, idLen int) resultKey {
	k := resultKey(sha256.Sum256([]byte(name)))
	id := name + strings.Repeat("x", max(idLen-len(name), 0))
	rc.put(&k, &vc.Delegation{ID: id[:idLen]}, fixedNow, false)
	return k
}

// checkAccounting fails unless every shard's bytes are the sum of its
// entries' sizes, each of which is what resultEntrySize says of its
// strings, and within the shard's budget; and the whole within budget.
func checkAccounting(t *testing.T, rc *Cache, budget int) {
	t.Helper()
	total := 0
	for i := range rc.shards {
		s := &rc.shards[i]
		sum := 0
		for _, e := range s.entries {
			d := &e.d
			all := []string{d.AgentDID, d.UserDID, d.Issuer, d.RootIssuer, d.RootAgentDID, d.ID, d.DelegationID}
			all = append(append(append(all, d.Scopes...), d.Audience...), d.Chain...)
			strs, seen := 0, map[string]bool{}
			for _, str := range all {
				if !seen[str] {
					seen[str] = true
					strs += len(str)
				}
			}
			n := len(d.Scopes) + len(d.Audience) + len(d.Chain)
			if want := resultEntrySize(strs, n); int(e.size) != want {
				t.Fatalf("shard %d: entry accounted %d B, is %d B", i, e.size, want)
			}
			sum += int(e.size)
		}
		if s.bytes != sum || s.bytes > s.maxBytes {
			t.Fatalf("shard %d: %d B accounted, entries %d B, budget %d B", i, s.bytes, sum, s.maxBytes)
		}
		total += s.bytes
	}
	if total > budget || rc.Bytes() != total {
		t.Fatalf("%d B accounted (Bytes %d), budget %d B", total, rc.Bytes(), budget)
	}
}

// TestResultCacheByteBudget: a flood of large entries keeps the accounted
// bytes within the budget, and their count well below maxEntries, while a
// small entry in use stays cached and a new small one is stored.
func TestResultCacheByteBudget(t *testing.T) {
	const maxEntries, maxBytes = 1000, 1 << 20 // 16 shards of 64 KiB: entries up to 4 KiB
	rc := New(vc.NewVerifier(nil), maxEntries, WithMaxBytes(maxBytes))
	large := rc.shards[0].maxEntryBytes - resultEntryOverhead // the largest stored
	hot := putID(rc, "hot", 40)
	for i := range 5000 {
		putID(rc, fmt.Sprint("large", i), large)
		if i%10 == 0 && rc.get(&hot, fixedNow) == nil {
			t.Fatalf("the entry in use was evicted after %d large ones", i+1)
		}
		checkAccounting(t, rc, maxBytes)
	}
	// 16 per shard at the most: 15 large ones and the hot one.
	if n := rc.Len(); n > maxBytes/(resultEntryOverhead+large)+1 || n < maxEntries/10 {
		t.Errorf("Len = %d after the flood", n)
	}
	small := putID(rc, "small", 40)
	if rc.get(&small, fixedNow) == nil {
		t.Error("a small entry was not stored after the flood")
	}
	checkAccounting(t, rc, maxBytes)

	// The large ones give way to small ones: the count bound applies
	// again.
	for i := range 3000 {
		putID(rc, fmt.Sprint("small", i), 40)
	}
	checkAccounting(t, rc, maxBytes)
	if n := rc.Len(); n > maxEntries || n < maxEntries*9/10 {
		t.Errorf("Len = %d after small entries, max %d", n, maxEntries)
	}
}

// TestResultCacheEntryLimit: an entry is stored up to the lesser of
// maxResultEntryBytes and a sixteenth of its shard's budget, and not a
// byte more; replacing an entry accounts only the new one.
func TestResultCacheEntryLimit(t *testing.T) {
	for _, tc := range []struct {
		name                string
		maxEntries, budget  int
		idLen               int
		stored              bool
		wantMaxEntryBytes   int
		wantShards, wantLen int
	}{
		{name: "typical", maxEntries: 10000, budget: defaultResultCacheBytes, idLen: 45, stored: true,
			wantMaxEntryBytes: maxResultEntryBytes, wantShards: 16},
		{name: "at the fixed limit", maxEntries: 10000, budget: defaultResultCacheBytes,
			idLen: maxResultEntryBytes - resultEntryOverhead, stored: true, wantMaxEntryBytes: maxResultEntryBytes, wantShards: 16},
		{name: "over the fixed limit", maxEntries: 10000, budget: defaultResultCacheBytes,
			idLen: maxResultEntryBytes - resultEntryOverhead + 1, wantMaxEntryBytes: maxResultEntryBytes, wantShards: 16},
		{name: "at a sixteenth of the shard", maxEntries: 10000, budget: 16 * 16 * 1000,
			idLen: 1000 - resultEntryOverhead, stored: true, wantMaxEntryBytes: 1000, wantShards: 16},
		{name: "over a sixteenth of the shard", maxEntries: 10000, budget: 16 * 16 * 1000,
			idLen: 1000 - resultEntryOverhead + 1, wantMaxEntryBytes: 1000, wantShards: 16},
		{name: "one shard: over a sixteenth of the budget", maxEntries: 100, budget: 16 * 1000,
			idLen: 1000 - resultEntryOverhead + 1, wantMaxEntryBytes: 1000, wantShards: 1},
		{name: "one shard: at a sixteenth of the budget", maxEntries: 100, budget: 16 * 1000,
			idLen: 1000 - resultEntryOverhead, stored: true, wantMaxEntryBytes: 1000, wantShards: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := New(vc.NewVerifier(nil), tc.maxEntries, WithMaxBytes(tc.budget))
			if len(rc.shards) != tc.wantShards || rc.shards[0].maxEntryBytes != tc.wantMaxEntryBytes {
				t.Fatalf("%d shards, entries up to %d B", len(rc.shards), rc.shards[0].maxEntryBytes)
			}
			k := putID(rc, "k", tc.idLen)
			if got := rc.get(&k, fixedNow) != nil; got != tc.stored {
				t.Fatalf("stored = %v, want %v (entry of %d B)", got, tc.stored, resultEntrySize(tc.idLen, 0))
			}
			want := 0
			if tc.stored {
				want = resultEntrySize(tc.idLen, 0)
			}
			if rc.Bytes() != want {
				t.Fatalf("Bytes = %d, want %d", rc.Bytes(), want)
			}
			putID(rc, "k", 10) // the same key again, smaller
			if rc.Len() != 1 || rc.Bytes() != resultEntrySize(10, 0) {
				t.Fatalf("after replacing: Len %d, Bytes %d, want 1, %d", rc.Len(), rc.Bytes(), resultEntrySize(10, 0))
			}
			rc.remove(&k)
			if rc.Len() != 0 || rc.Bytes() != 0 {
				t.Fatalf("after removing: Len %d, Bytes %d", rc.Len(), rc.Bytes())
			}
		})
	}
}

// TestResultCacheBytesOption: the budget's default, the option, and its
// split over the shards.
func TestResultCacheBytesOption(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		opts []Option
		want int
	}{
		{"default", nil, defaultResultCacheBytes},
		{"set", []Option{WithMaxBytes(1<<20 + 5)}, 1<<20 + 5},
		{"zero keeps the default", []Option{WithMaxBytes(0)}, defaultResultCacheBytes},
		{"negative keeps the default", []Option{WithMaxBytes(-1)}, defaultResultCacheBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := New(f.verifier(), 1000, tc.opts...)
			total := 0
			for i := range v.shards {
				total += v.shards[i].maxBytes
			}
			if len(v.shards) != 16 || total != tc.want {
				t.Errorf("%d shards, %d B in all, want 16, %d", len(v.shards), total, tc.want)
			}
		})
	}
}

// TestResultCacheLongIDs: through Verify, credentials with long ids fill
// the cache only up to its byte budget, the one in use stays cached, and
// outsized ones are verified every time rather than cached.
func TestResultCacheLongIDs(t *testing.T) {
	n := 600
	if raceEnabled || testing.Short() {
		n = 200
	}
	f := newFixture(t)
	ctx := context.Background()
	aud := vc.ForAudience(serverDID)
	verify := func(v *Cache, raw []byte) {
		t.Helper()
		if _, err := v.Verify(ctx, raw, aud); err != nil {
			t.Fatal(err)
		}
	}

	// One shard (under 256 entries) of 256 KiB: entries up to 16 KiB. An
	// id of 2,000 digits makes an entry of about 4.7 KB (the id and the
	// delegation id), so the bytes bound the cache to about 55 entries,
	// the count to 255.
	const maxEntries, budget = 255, 256 << 10
	v, res, hc := f.cached(&testClock{t: fixedNow}, maxEntries, []Option{WithMaxBytes(budget)})
	hot := f.minter(t).mint(n)
	m := f.minter(t)
	m.idDigits = 2000
	verify(v, hot)
	for i := range n {
		verify(v, m.mint(i))
		if i%10 == 0 {
			verify(v, hot)
		}
		if b := v.Bytes(); b > budget {
			t.Fatalf("after %d: %d B > %d", i+1, b, budget)
		}
	}
	if l := v.Len(); l > budget/resultEntrySize(2*2000, 0)+1 {
		t.Errorf("Len = %d of %d long-id credentials", l, n)
	}
	expectCalls(t, res, int64(n+1), "long ids")
	if h := hc.hits.Load(); h != int64((n+9)/10) {
		t.Errorf("credential in use: %d hits of %d", h, (n+9)/10)
	}

	// Credentials of about 54 KB are not cached at all under
	// the default budget.
	v, res, _ = f.cached(&testClock{t: fixedNow}, 10000, nil)
	m.idDigits = 13000
	for i := range 3 {
		raw := m.mint(i)
		verify(v, raw)
		verify(v, raw)
	}
	if l, b := v.Len(), v.Bytes(); l != 0 || b != 0 {
		t.Errorf("outsized credentials cached: Len %d, %d B", l, b)
	}
	expectCalls(t, res, 6, "outsized credentials, each verified twice")
}
