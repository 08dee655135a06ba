package edge

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// BenchmarkProofPath is BENCHMARKS.md's p at the handler: a reused (cached)
// credential, and a fresh KYA-OS request proof on every request under
// `request_proof required`, its nonce consumed in a memory store. The
// proofs are minted before the timer starts; compare with BenchmarkHotPath/b
// (the same request without a proof) and kyaos's BenchmarkBareEd25519.
func BenchmarkProofPath(b *testing.B) {
	f := newFixture(b)
	auth := "Bearer " + f.jwt(b, nil)
	next := Next(func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body) // as reverse_proxy reads it
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, hotPathReply)
		return err
	})
	logger := zap.New(zapcore.NewCore(
		zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel))
	store := challenge.NewMemoryStore(context.Background(), challenge.WithMaxEntries(1<<22))
	h := f.handler(b, func(c *setup) {
		c.use(WithLogger(logger), WithMetrics(prometheus.NewRegistry()))
		c.RequestProof = "required"
		c.use(WithNonceStore(store, "memory"))
	})
	mint := func() []byte {
		body, _, err := kyaos.SignRequest([]byte(toolsCallBody), f.agent.priv, kyaos.SignOptions{KID: f.agent.kid, Audience: testAudience})
		if err != nil {
			b.Fatal(err)
		}
		return body
	}
	one := func(body []byte) {
		r, w := hotPathRequest(body, auth), httptest.NewRecorder()
		if err := h.ServeNext(w, r, next); err != nil || w.Code != http.StatusOK || w.Body.String() != hotPathReply {
			b.Fatalf("HTTP %d %q: %v", w.Code, w.Body, err)
		}
	}
	one(mint()) // the first request fills the caches
	// b.Loop runs the body with growing counts; mint each round's proofs
	// with the timer stopped, every one used once (a repeat is a replay).
	// The CPU the minting takes is left out of cpu-ns/op.
	pool := make([][]byte, 0, 1024)
	b.ReportAllocs()
	cpu0, cpuOK := processCPU()
	for i := 0; b.Loop(); i++ {
		if i == len(pool) {
			b.StopTimer()
			m0, ok0 := processCPU()
			pool, i = pool[:0], 0
			for range cap(pool) {
				pool = append(pool, mint())
			}
			m1, ok1 := processCPU()
			cpu0, cpuOK = cpu0+(m1-m0), cpuOK && ok0 && ok1
			b.StartTimer()
		}
		one(pool[i])
	}
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}
