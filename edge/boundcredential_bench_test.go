package edge_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
)

// BenchmarkBoundCredential is the cached path (the credential verified
// before) for an unbound credential sent as a bearer, and for a
// DPoP-bound one with a fresh proof on every request (memory nonce
// store): the difference is the price of one proof check, which
// "proof-check" measures alone (dpop.Checker.Check on the same proofs).
// The proofs are made before the timer starts.
func BenchmarkBoundCredential(b *testing.B) {
	p := newBoundParties(b)
	next := func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		return nil
	}
	for _, tc := range []struct {
		name         string
		bound, alone bool
	}{{"unbound-bearer", false, false}, {"bound-dpop", true, false}, {"proof-check", true, true}} {
		bound := tc.bound
		b.Run(tc.name, func(b *testing.B) {
			store := challenge.NewMemoryStore(context.Background(), challenge.WithMaxEntries(b.N+10))
			defer store.Close()
			h, err := edge.New(edge.Config{TrustedIssuers: []string{p.userDID}}, edge.WithNonceStore(store, "memory"))
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			jkt, scheme := "", "Bearer "
			if bound {
				jkt, scheme = p.jkt, "DPoP "
			}
			cred := p.credential(b, jkt)
			check := dpop.NewChecker(store)
			proofs := make([]string, b.N+1)
			if bound {
				for i := range proofs {
					proofs[i] = p.proof(b, p.agentKey, http.MethodPost, boundURL, cred, time.Now())
				}
			}
			one := func(i int) {
				if tc.alone {
					if _, err := check.Check(context.Background(), proofs[i], dpop.Expect{Method: http.MethodPost, URL: boundURL, AccessToken: cred, JKT: jkt}); err != nil {
						b.Fatal(err)
					}
					return
				}
				r := httptest.NewRequest(http.MethodPost, boundURL, strings.NewReader(listBody))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Authorization", scheme+cred)
				if bound {
					r.Header.Set("DPoP", proofs[i])
				}
				w := httptest.NewRecorder()
				if err := h.ServeNext(w, r, next); err != nil || w.Code != http.StatusOK {
					b.Fatalf("HTTP %d %s: %v", w.Code, w.Body, err)
				}
			}
			one(b.N) // fills the verification cache
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, cpuOK := edge.ProcessCPU()
			for i := range b.N {
				one(i)
			}
			b.StopTimer()
			// On a shared machine, compare cpu-ns/op: wall time also counts
			// the time other processes held the CPU.
			if cpu1, ok := edge.ProcessCPU(); ok && cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
