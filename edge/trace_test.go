package edge

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
)

// tracedRequest is r inside a recording server span of tp, as Caddy's
// tracing directive hands it on; end ends that span.
func tracedRequest(tp trace.TracerProvider, r *http.Request) (traced *http.Request, end func()) {
	ctx, span := tp.Tracer("test").Start(context.Background(), "handler", trace.WithSpanKind(trace.SpanKindServer))
	return r.WithContext(ctx), func() { span.End() }
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestTraceDecision: with the request traced, the edge's decision is on the
// request's span, and a verification the cache did not serve has a span
// of its own with the DID resolution under it; a second request with the
// same credential, served by the cache, has none.
func TestTraceDecision(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	f := newFixture(t)
	h := f.handler(t, nil)
	auth := "Bearer " + f.jwt(t, nil)

	for i := range 2 {
		r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
		r.Header.Set("Authorization", auth)
		r, end := tracedRequest(tp, r)
		if res := serve(t, h, r); !res.called || res.rec.Code != http.StatusOK {
			t.Fatalf("request %d: HTTP %d, forwarded %v", i, res.rec.Code, res.called)
		}
		end()
	}
	r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set("Authorization", "Bearer "+obsTamper(f.jwt(t, nil)))
	r, end := tracedRequest(tp, r)
	if res := serve(t, h, r); res.called || res.rec.Code != http.StatusUnauthorized {
		t.Fatalf("tampered: HTTP %d, forwarded %v", res.rec.Code, res.called)
	}
	end()

	var servers []sdktrace.ReadOnlySpan
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		if s.Name() == "handler" {
			servers = append(servers, s)
		} else {
			children[s.Parent().SpanID()] = append(children[s.Parent().SpanID()], s)
		}
	}
	if len(servers) != 3 {
		t.Fatalf("%d request spans, want 3", len(servers))
	}
	want := map[attribute.Key]string{
		"mcpi.outcome": "admitted", "mcpi.reason": "ok", "mcpi.agent_did": f.agent.did, "mcpi.user_did": f.user.did,
		"mcpi.tool": "echo", "mcpi.carrier": "authorization", "mcpi.era": "2025",
	}
	for i, s := range servers[:2] {
		got := spanAttrs(s)
		for k, v := range want {
			if got[k].AsString() != v {
				t.Errorf("request %d: %s = %q, want %q", i, k, got[k].AsString(), v)
			}
		}
	}
	if got := spanAttrs(servers[2]); got["mcpi.outcome"].AsString() != "rejected" || got["mcpi.reason"].AsString() != "bad_signature" ||
		got["mcpi.status"].AsInt64() != 401 || got["mcpi.agent_did"].AsString() != "" {
		t.Errorf("tampered request's span: %v", got)
	}

	// The first request verified: one verification span, the DID
	// resolution under it. The second was served by the cache.
	first := children[servers[0].SpanContext().SpanID()]
	if len(first) != 1 || first[0].Name() != observe.SpanVerify {
		t.Fatalf("first request's child spans: %v, want one %s", names(first), observe.SpanVerify)
	}
	res := children[first[0].SpanContext().SpanID()]
	if len(res) == 0 || res[0].Name() != observe.SpanResolveDID || spanAttrs(res[0])["mcpi.did_method"].AsString() != "key" {
		t.Errorf("verification's child spans: %v, want %s (did:key)", names(res), observe.SpanResolveDID)
	}
	if got := children[servers[1].SpanContext().SpanID()]; len(got) != 0 {
		t.Errorf("cached request's child spans: %v, want none", names(got))
	}
	if got := children[servers[2].SpanContext().SpanID()]; len(got) != 1 || got[0].Status().Code.String() != "Error" {
		t.Errorf("tampered request's child spans: %v, want one failed verification", names(got))
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name())
	}
	return n
}

// TestTraceCostsNothingUntraced: a request without a recording span
// allocates no more for tracing being built in (the admitted request's
// allocations with and without a non-recording span in its context).
func TestTraceCostsNothingUntraced(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	auth := "Bearer " + f.jwt(t, nil)
	next := Next(func(http.ResponseWriter, *http.Request) error { return nil })
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
	allocs := func(ctx context.Context) float64 {
		return testing.AllocsPerRun(50, func() {
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Set("Authorization", auth)
			r = prepareRequest(r.WithContext(ctx), newTestReplacer())
			if err := h.ServeNext(discardWriter{}, r, next); err != nil {
				t.Fatal(err)
			}
		})
	}
	plain := allocs(context.Background())
	// Not sampled: a span in the context that does not record.
	unsampled := allocs(trace.ContextWithSpanContext(context.Background(), sc))
	if unsampled > plain {
		t.Errorf("%v allocations with an unsampled span, %v without", unsampled, plain)
	}
}

type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}
