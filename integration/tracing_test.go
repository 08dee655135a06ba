package integration

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: what Caddy's
// tracing directive exports to, through its own OTLP exporter, when
// OTEL_EXPORTER_OTLP_ENDPOINT points at it. It keeps the spans it got.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(data, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			o.spans = append(o.spans, ss.GetSpans()...)
		}
	}
	o.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

func (o *otlpReceiver) all() []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*tracepb.Span(nil), o.spans...)
}

func otlpAttrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.GetAttributes() {
		v := kv.GetValue()
		if _, ok := v.GetValue().(*commonpb.AnyValue_IntValue); ok {
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		} else {
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

// TestTracingThroughCaddy: with Caddy's `tracing` directive on, exported
// over OTLP/HTTP to a receiver in the test, the request's span carries the
// edge's decision, a first verification has its span with the DID
// resolution under it, and the audit entry names the trace.
func TestTracingThroughCaddy(t *testing.T) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)

	rec := &recorder{next: mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	auditLog := filepath.Join(dir, "audit.log")
	caddyfile := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	auto_https off
	persist_config off
	skip_install_trust
	grace_period 1ns
	storage file_system {
		root %s
	}
	log mcpi_audit {
		include %s
		output file %s
		format json
	}
}

:%d {
	bind 127.0.0.1
	tracing {
		span mcp
	}
	mcpi {
		trust any
	}
	reverse_proxy %s
}
`, freePort(t), filepath.Join(dir, "storage"), auditLogger, auditLog, h.port, up.Listener.Addr())
	h.start(dir, caddyfile,
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL,
		"OTEL_EXPORTER_OTLP_COMPRESSION=none",
		"OTEL_BSP_SCHEDULE_DELAY=50",
	)
	w := newWorld(t, h)
	ctx := testContext(t)
	msg := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "greet", "arguments": map[string]any{}}}
	admitted := h.post(ctx, "/mcp", http.Header{"Authorization": {"Bearer " + w.jwt(t)}}, "", msg)
	if admitted.Status == http.StatusUnauthorized || admitted.Status == http.StatusForbidden {
		t.Fatalf("admitted request: HTTP %d: %s", admitted.Status, admitted.Body)
	}
	if refused := h.post(ctx, "/mcp", nil, "", msg); refused.Status != http.StatusUnauthorized {
		t.Fatalf("request without a credential: HTTP %d, want 401", refused.Status)
	}

	// The batch processor exports every 50 ms.
	var decided []*tracepb.Span
	var spans []*tracepb.Span
	for deadline := time.Now().Add(15 * time.Second); len(decided) < 2 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		spans, decided = recv.all(), nil
		for _, s := range spans {
			if otlpAttrs(s)["mcpi.outcome"] != "" {
				decided = append(decided, s)
			}
		}
	}
	if len(decided) != 2 {
		t.Fatalf("%d request spans with a decision, want 2 (of %d spans)", len(decided), len(spans))
	}
	var ok, no *tracepb.Span
	for _, s := range decided {
		if otlpAttrs(s)["mcpi.outcome"] == "admitted" {
			ok = s
		} else {
			no = s
		}
	}
	if ok == nil || no == nil {
		t.Fatalf("decisions: %v and %v", otlpAttrs(decided[0]), otlpAttrs(decided[1]))
	}
	want := map[string]string{"mcpi.reason": "ok", "mcpi.agent_did": w.agent.did, "mcpi.user_did": w.user.did,
		"mcpi.tool": "greet", "mcpi.carrier": "authorization", "mcpi.era": "2025"}
	got := otlpAttrs(ok)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("admitted request's span: %s = %q, want %q", k, got[k], v)
		}
	}
	if ok.GetName() != "mcp" || ok.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the decision is on span %q (%v), want the request's server span", ok.GetName(), ok.GetKind())
	}
	if a := otlpAttrs(no); a["mcpi.reason"] != "no_credential" || a["mcpi.agent_did"] != "" {
		t.Errorf("refused request's span: %v", a)
	}

	children := map[string][]*tracepb.Span{}
	for _, s := range spans {
		children[hex.EncodeToString(s.GetParentSpanId())] = append(children[hex.EncodeToString(s.GetParentSpanId())], s)
	}
	var verify *tracepb.Span
	for _, c := range children[hex.EncodeToString(ok.GetSpanId())] {
		if c.GetName() == "mcpi.verify_credential" {
			verify = c
		}
	}
	if verify == nil {
		t.Fatalf("no mcpi.verify_credential span under the admitted request's span")
	}
	var resolved bool
	for _, c := range children[hex.EncodeToString(verify.GetSpanId())] {
		resolved = resolved || c.GetName() == "mcpi.resolve_did" && otlpAttrs(c)["mcpi.did_method"] == "key"
	}
	if !resolved {
		t.Errorf("no mcpi.resolve_did span under the verification")
	}
	for _, s := range spans {
		for _, kv := range s.GetAttributes() {
			if v := kv.GetValue().GetStringValue(); len(v) > 200 {
				t.Errorf("span %s attribute %s holds %d bytes: a credential?", s.GetName(), kv.GetKey(), len(v))
			}
		}
	}

	// The audit entry of the admitted request names its trace.
	traceID := hex.EncodeToString(ok.GetTraceId())
	var found bool
	for deadline := time.Now().Add(5 * time.Second); !found && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		f, err := os.Open(auditLog)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e map[string]any
			if json.Unmarshal(sc.Bytes(), &e) == nil && e["outcome"] == "admitted" {
				found = e["trace_id"] == traceID
				if !found {
					t.Errorf("audit entry trace_id %v, want %s", e["trace_id"], traceID)
					found = true
				}
			}
		}
		f.Close()
	}
	if !found {
		t.Errorf("no admitted audit entry")
	}
}
