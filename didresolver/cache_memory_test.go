package didresolver

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/memstat"
)

// TestCacheMemory: MCPI_MEMTEST=1 resolves many distinct did:web issuers
// (MCPI_MEMTEST_DIDS, default 100000) through a Cache with the default
// bound (10000 documents), each document parsed from JSON as the did:web
// resolver does (one Ed25519 key, a service), and reports the live heap
// and RSS, for BENCHMARKS.md. A measurement, not a check, beyond the
// bound on entries.
func TestCacheMemory(t *testing.T) {
	if os.Getenv("MCPI_MEMTEST") != "1" {
		t.Skip("a measurement for BENCHMARKS.md: set MCPI_MEMTEST=1 to run it")
	}
	n := 100000
	if s := os.Getenv("MCPI_MEMTEST_DIDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			t.Fatalf("MCPI_MEMTEST_DIDS=%q", s)
		}
	}
	const doc = `{"@context":["https://www.w3.org/ns/did/v1","https://w3id.org/security/multikey/v1"],` +
		`"id":%[1]q,"verificationMethod":[{"id":"%[1]s#key-1","type":"Multikey","controller":%[1]q,` +
		`"publicKeyMultibase":"z6MkiupQ1QPitvNtmEwCb47mkfCtCoU9A6znu7ECSqyFbVXH"}],` +
		`"authentication":["%[1]s#key-1"],"assertionMethod":["%[1]s#key-1"],` +
		`"service":[{"id":"%[1]s#mcp","type":"MCPServer","serviceEndpoint":"https://%[2]s/mcp"}]}`
	docBytes := 0
	inner := resolverFunc(func(_ context.Context, did string) (*Document, error) {
		host := strings.TrimPrefix(did, "did:web:")
		b := fmt.Appendf(nil, doc, did, host)
		docBytes = len(b)
		return ParseDocument(b)
	})
	c := NewCache(inner)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	ctx := context.Background()
	for i := range n {
		did := fmt.Sprintf("did:web:issuer-%07d.example.com", i)
		d, err := c.Resolve(ctx, did)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Key(did+"#key-1", AssertionMethod); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	rss := memstat.RSS()
	runtime.GC()
	runtime.ReadMemStats(&after)
	c.mu.Lock()
	entries := len(c.entries)
	c.mu.Unlock()
	if entries > defaultMaxEntries {
		t.Errorf("%d entries, bound %d", entries, defaultMaxEntries)
	}
	live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d distinct did:web issuers (documents of %d B) in %v, cache max %d: %d entries; live heap +%.1f MiB (%.0f B/entry); RSS %.1f MiB",
		n, docBytes, elapsed.Round(time.Millisecond), defaultMaxEntries, entries,
		float64(live)/(1<<20), float64(live)/float64(max(entries, 1)), float64(rss)/(1<<20))
	runtime.KeepAlive(c)
}
