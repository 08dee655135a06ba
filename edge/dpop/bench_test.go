package dpop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
)

// BenchmarkCheck is one proof check with the memory store: parse, key,
// signature, claims, marker.
func BenchmarkCheck(b *testing.B) {
	for _, k := range []*testKey{newEdKey(b), newECKey(b)} {
		b.Run(k.alg, func(b *testing.B) {
			proofs := make([]string, b.N)
			for i := range proofs {
				proofs[i] = k.proof(fmt.Sprint("jti-", i))
			}
			store := challenge.NewMemoryStore(context.Background(), challenge.WithMemoryClock(func() time.Time { return testNow }), challenge.WithMaxEntries(b.N+1))
			defer store.Close()
			c := dpop.NewChecker(store, dpop.WithClock(func() time.Time { return testNow }))
			want := dpop.Expect{Method: "GET", URL: testURL, AccessToken: testToken}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := c.Check(context.Background(), proofs[i], want); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
