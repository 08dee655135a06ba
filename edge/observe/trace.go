package observe

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// Traces: when the host traces requests (Caddy's `tracing` directive puts
// an OpenTelemetry span in the request's context), the edge's decision is
// written on the request's span as attributes, and the work that can be
// slow gets a child span of its own: DID resolution, credential
// verification the result cache did not serve, the nonce store, and the
// discovery of the upstream's mcp-i.json. The spans are made by the tracer
// provider of the request's span, so they go wherever the host exports
// its own; the edge sets up no exporter.
//
// Without a recording span (no tracing, or a request not sampled) none of
// this costs more than reading the span from the context: no span, no
// attribute, no allocation.
//
// Like the audit log, a span never holds a credential, token, nonce,
// proof or header value: the DIDs are those of the verified delegation.

// TracerName is the instrumentation scope of the edge's spans.
const TracerName = "github.com/mcpi-edge/caddy-mcpi"

// The edge's child spans.
const (
	SpanResolveDID   = "mcpi.resolve_did"
	SpanVerify       = "mcpi.verify_credential"
	SpanNonceStore   = "mcpi.nonce_store"
	SpanDiscovery    = "mcpi.discover_upstream"
	maxSpanAttribute = MaxAuditTool
)

// StartSpan starts the child span name of ctx's span when that span
// records; otherwise it returns ctx and the span that is there (not
// recording), at no cost. End it with EndSpan.
// (Attributes are set on the span afterwards, when it records: a variadic
// argument here would be allocated on every call.)
func StartSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(TracerName).Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
}

// StartNonceStoreSpan starts the span of one operation (put, consume,
// peek, use_once) of the nonce store named store ("memory", "redis").
func StartNonceStoreSpan(ctx context.Context, store, op string) (context.Context, trace.Span) {
	ctx, span := StartSpan(ctx, SpanNonceStore)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("mcpi.store", store), attribute.String("mcpi.op", op))
	}
	return ctx, span
}

// EndSpan ends span, marking it failed with err's message when err is not
// nil. A span StartSpan did not start (not recording) is left alone.
func EndSpan(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// StartVerify starts the span of a credential verification the result
// cache did not serve: what vc.WithTrace takes. The returned func ends it.
func StartVerify(ctx context.Context) (context.Context, func(error)) {
	ctx, span := StartSpan(ctx, SpanVerify)
	if !span.IsRecording() {
		return ctx, endNothing
	}
	return ctx, func(err error) { EndSpan(span, err) }
}

func endNothing(error) {}

// traceDecision writes d on the request's span, when it records.
func traceDecision(r *http.Request, d Decision) {
	if r == nil {
		return
	}
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs,
		attribute.String("mcpi.outcome", d.Outcome),
		attribute.String("mcpi.reason", d.Reason),
		attribute.String("mcpi.era", eraName(mcp.HeaderEra(r.Header))),
	)
	if d.Delegation != nil {
		attrs = append(attrs,
			attribute.String("mcpi.agent_did", d.Delegation.AgentDID),
			attribute.String("mcpi.user_did", d.Delegation.UserDID))
	}
	if d.Carrier != "" {
		attrs = append(attrs, attribute.String("mcpi.carrier", d.Carrier))
	}
	if d.Tool != "" {
		tool := d.Tool
		if len(tool) > maxSpanAttribute {
			tool = tool[:maxSpanAttribute]
		}
		attrs = append(attrs, attribute.String("mcpi.tool", tool))
	}
	if d.Handshake != "" {
		attrs = append(attrs, attribute.String("mcpi.handshake", d.Handshake), attribute.String("mcpi.call", d.Call))
	}
	if d.Status != 0 {
		attrs = append(attrs, attribute.Int("mcpi.status", d.Status))
	}
	span.SetAttributes(attrs...)
}

// eraName names the MCP era of a request as its first protocol version's
// year: "2026" for a request with a 2026 (or later) MCP-Protocol-Version
// header, else "2025".
func eraName(e mcp.Era) string {
	if e >= mcp.Era2026 {
		return "2026"
	}
	return "2025"
}

// TraceResolver resolves DIDs through next, each resolution in a span of
// its own (with the DID's method, not the DID: an unverified credential
// names it). It keeps next's Refresh, if it has one.
func TraceResolver(next didresolver.Resolver) didresolver.Resolver {
	if rf, ok := next.(didresolver.Refresher); ok {
		return tracedRefresher{tracedResolver{next}, rf}
	}
	return tracedResolver{next}
}

type tracedResolver struct{ next didresolver.Resolver }

// Observed implements didresolver.Observer: without a recorded span there
// is nothing to trace, and a did:key is then answered from next's derived
// keys without building its document.
func (t tracedResolver) Observed(ctx context.Context) didresolver.Resolver {
	if trace.SpanFromContext(ctx).IsRecording() {
		return nil
	}
	return t.next
}

func (t tracedResolver) Resolve(ctx context.Context, did string) (*didresolver.Document, error) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return t.next.Resolve(ctx, did)
	}
	ctx, span := StartSpan(ctx, SpanResolveDID)
	span.SetAttributes(attribute.String("mcpi.did_method", didMethod(did)))
	doc, err := t.next.Resolve(ctx, did)
	EndSpan(span, err)
	return doc, err
}

type tracedRefresher struct {
	tracedResolver
	rf didresolver.Refresher
}

func (t tracedRefresher) Refresh(ctx context.Context, did string) (*didresolver.Document, error) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return t.rf.Refresh(ctx, did)
	}
	ctx, span := StartSpan(ctx, SpanResolveDID)
	span.SetAttributes(attribute.String("mcpi.did_method", didMethod(did)), attribute.Bool("mcpi.did_refresh", true))
	doc, err := t.rf.Refresh(ctx, did)
	EndSpan(span, err)
	return doc, err
}

// didMethod is did's method ("key", "web"), "" when did is no DID; a
// bounded attribute whatever a client sends.
func didMethod(did string) string {
	for _, m := range [...]string{"key", "web", "jwk", "peer", "plc", "ion", "ethr", "pkh"} {
		if len(did) > len(m)+5 && did[:4] == "did:" && did[4:4+len(m)] == m && did[4+len(m)] == ':' {
			return m
		}
	}
	if len(did) > 4 && did[:4] == "did:" {
		return "other"
	}
	return ""
}
