package observe

import (
	"context"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

const testDIDKey = "did:key:z6MkiupQ1QPitvNtmEwCb47mkfCtCoU9A6znu7ECSqyFbVXH"

// TestTraceResolverDIDKey: without a recorded span, a did:key resolved
// through the traced resolver costs what it costs without it (its derived
// key, no document built); with one, the resolution gets its span.
func TestTraceResolverDIDKey(t *testing.T) {
	ctx := context.Background()
	bare := didresolver.New()
	traced := TraceResolver(didresolver.New())
	kid := testDIDKey + "#" + testDIDKey[len("did:key:"):]
	allocs := func(r didresolver.Resolver) float64 {
		if _, err := didresolver.ResolveKey(ctx, r, kid, didresolver.Authentication); err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(100, func() {
			_, _ = didresolver.ResolveKey(ctx, r, kid, didresolver.Authentication)
		})
	}
	if b, tr := allocs(bare), allocs(traced); tr > b {
		t.Errorf("a did:key through the traced resolver costs %v allocations, %v without it", tr, b)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	sctx, span := tp.Tracer("test").Start(ctx, "request")
	if _, err := didresolver.ResolveKey(sctx, traced, kid, didresolver.Authentication); err != nil {
		t.Fatal(err)
	}
	span.End()
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	if len(names) != 2 || names[0] != SpanResolveDID {
		t.Errorf("spans %v, want %s under the request's", names, SpanResolveDID)
	}
}
