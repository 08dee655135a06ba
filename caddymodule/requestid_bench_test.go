package caddymodule

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// BenchmarkAuditLine: what the audit line of an admitted request costs the
// request in Caddy (allocs/op, ns/op: recording and queueing; the writer
// encodes off the request path), with the id taken as before (making
// {http.request.uuid}) and as now (reusing it if made, else the edge's
// own).
func BenchmarkAuditLine(b *testing.B) {
	makeUUID := func(r *http.Request) string {
		id, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).GetString("http.request.uuid")
		return id
	}
	for _, c := range []struct {
		name string
		id   func(*http.Request) string
	}{{"uuid made", makeUUID}, {"reused or own", caddyHooks.RequestID}} {
		b.Run(c.name, func(b *testing.B) {
			core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
			rec, err := observe.New(observe.Options{Logger: zap.New(core), Request: observe.Request{
				Upstream:  func(*http.Request) string { return "https://api.example.com" },
				RequestID: c.id,
				ClientIP:  caddyHooks.ClientIP,
				Original:  caddyHooks.Original,
			}})
			if err != nil {
				b.Fatal(err)
			}
			d := observe.Decision{Outcome: "admitted", Reason: "ok", Status: 200, Carrier: "authorization", Tool: "greet",
				Delegation: &vc.Delegation{AgentDID: "did:key:z6MkAgent", UserDID: "did:key:z6MkUser", DelegationID: "urn:uuid:1",
					Issuer: "did:key:z6MkUser", Scopes: []string{"greet:execute"}}}
			reqs := make([]*http.Request, 1024)
			prepare := func() {
				for i := range reqs {
					r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
					reqs[i] = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), httptest.NewRecorder(), nil)
				}
			}
			prepare()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				rec.Decision(reqs[i%len(reqs)], d)
				if i%len(reqs) == len(reqs)-1 {
					// Fresh requests (a uuid is made once per request) and
					// an empty queue, off the clock.
					b.StopTimer()
					if err := rec.Flush(); err != nil {
						b.Fatal(err)
					}
					prepare()
					b.StartTimer()
				}
			}
			b.StopTimer()
			if err := rec.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
