package observe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestAuditRequestID: every audit entry of a request has a request_id:
// the host's id when the request has one (Caddy: the access log's uuid),
// so that the two logs join; otherwise the recorder's own, unique per
// entry and per recorder. With a span in the request's context, the entry
// names its trace.
func TestAuditRequestID(t *testing.T) {
	newRec := func(hostID string) (*Recorder, *observer.ObservedLogs) {
		obs, logs := observer.New(zapcore.InfoLevel)
		rec, err := New(Options{Logger: zap.New(obs).Named("mcpi"), Request: Request{
			RequestID: func(*http.Request) string { return hostID },
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rec.Close() })
		return rec, logs
	}
	ids := func(t *testing.T, rec *Recorder, logs *observer.ObservedLogs, r *http.Request, n int) []map[string]any {
		t.Helper()
		for range n {
			rec.Decision(r, Decision{Outcome: "admitted", Reason: "ok", Status: 200})
		}
		if err := rec.Flush(); err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for _, e := range logs.FilterLoggerName(auditName).All() {
			out = append(out, e.ContextMap())
		}
		if len(out) != n {
			t.Fatalf("%d entries, want %d", len(out), n)
		}
		return out
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)

	t.Run("host id", func(t *testing.T) {
		rec, logs := newRec("6b1c0f4e-94e4-4b5e-a3c5-5b1d9a3e2f10")
		for _, e := range ids(t, rec, logs, r, 2) {
			if e["request_id"] != "6b1c0f4e-94e4-4b5e-a3c5-5b1d9a3e2f10" {
				t.Errorf("request_id = %#v, want the host's", e["request_id"])
			}
			if _, ok := e["trace_id"]; ok {
				t.Errorf("trace_id %#v without a span", e["trace_id"])
			}
		}
	})
	t.Run("own id", func(t *testing.T) {
		seen := map[any]bool{}
		for range 2 {
			rec, logs := newRec("")
			for _, e := range ids(t, rec, logs, r, 3) {
				id, _ := e["request_id"].(string)
				if !regexp.MustCompile(`^[0-9a-f]{16}-[0-9a-f]+$`).MatchString(id) || seen[id] {
					t.Errorf("request_id = %q: want a fresh recorder id", id)
				}
				seen[id] = true
			}
		}
	})
	t.Run("trace", func(t *testing.T) {
		tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
		sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
		rt := r.WithContext(trace.ContextWithSpanContext(context.Background(), sc))
		rec, logs := newRec("")
		if e := ids(t, rec, logs, rt, 1)[0]; e["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("trace_id = %#v, want the span's trace", e["trace_id"])
		}
	})
}
