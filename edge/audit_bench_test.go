package edge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// BenchmarkAuditPaced is what an audit entry costs the process (cpu-ns/op:
// recording, queueing, the writer's encoding, and waking the writer) when
// decisions come as a busy edge's requests do: spread out, from several
// goroutines, with the queue emptying between them. A tight loop keeps the
// writer busy and cannot show the writer's start-up cost. The pacing
// itself (a sleep per decision) is part of the figure, equally for every
// version of the queue.
func BenchmarkAuditPaced(b *testing.B) {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	rec, err := observe.New(observe.Options{Logger: zap.New(core), Request: observe.Request{
		Upstream:  func(*http.Request) string { return "https://api.example.com" },
		RequestID: func(*http.Request) string { return "6b1c0f4e-94e4-4b5e-a3c5-5b1d9a3e2f10" },
	}})
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	d := observe.Decision{Outcome: "admitted", Reason: "ok", Status: 200, Carrier: "authorization", Tool: "echo",
		Delegation: &vc.Delegation{AgentDID: "did:key:z6MkAgent", UserDID: "did:key:z6MkUser", DelegationID: "urn:uuid:1",
			Issuer: "did:key:z6MkUser", Scopes: []string{"tools:read", "echo:execute"}}}
	const workers = 8
	cpu0, cpuOK := processCPU()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < b.N; i += workers {
				rec.Decision(r, d)
				time.Sleep(200 * time.Microsecond)
			}
		})
	}
	wg.Wait()
	if err := rec.Close(); err != nil {
		b.Fatal(err)
	}
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}
