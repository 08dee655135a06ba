package edge

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// obsTamper changes one character in the middle of a JWS signature: still
// well-formed, no longer valid.
func obsTamper(jws string) string {
	i := strings.LastIndexByte(jws, '.') + (len(jws)-strings.LastIndexByte(jws, '.'))/2
	b := []byte(jws)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// obsContext is a metrics registry of the test's own, as every Caddy
// config load has.
func obsContext(t *testing.T) (prometheus.Registerer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return reg, reg
}

// obsHandler provisions a handler trusting f's user in ctx, with its logs
// (audit included) going to an observer.
func obsHandler(t *testing.T, reg prometheus.Registerer, f fixture, mod func(*Handler)) (*Handler, *observer.ObservedLogs) {
	t.Helper()
	h := &Handler{Config: Config{TrustedIssuers: []string{f.user.did}}, registerer: reg, hooks: testHooks}
	if mod != nil {
		mod(h)
	}
	if err := h.init(); err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	core, logs := observer.New(zapcore.InfoLevel)
	h.logger = zap.New(core).Named("http.handlers.mcpi")
	return h, logs
}

// obsSeries is one sample of a gathered metric: its labels and value (the
// sample count for a histogram).
type obsSeries struct {
	labels map[string]string
	value  float64
}

func gatherMCPI(t *testing.T, reg prometheus.Gatherer) map[string][]obsSeries {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := make(map[string][]obsSeries)
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "caddy_mcpi_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			s := obsSeries{labels: make(map[string]string)}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.value = m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.value = float64(m.GetHistogram().GetSampleCount())
			}
			out[mf.GetName()] = append(out[mf.GetName()], s)
		}
	}
	return out
}

// lintMCPI runs Prometheus' linter (naming, units, help) on the mcpi
// metrics of reg.
func lintMCPI(t *testing.T, reg prometheus.Gatherer) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var ours []*dto.MetricFamily
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "caddy_mcpi_") {
			ours = append(ours, mf)
		}
	}
	problems, err := promlint.NewWithMetricFamilies(ours).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}

// obsValue returns the value of the series of name with exactly labels.
func obsValue(all map[string][]obsSeries, name string, labels ...string) float64 {
	for _, s := range all[name] {
		if len(s.labels) != len(labels)/2 {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				match = false
			}
		}
		if match {
			return s.value
		}
	}
	return 0
}

// safeLabel is the shape every label value must have: snake_case tags and
// MCP tool names, never a DID (':'), a JWS or a URL.
var safeLabel = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,64}$`)

// assertBoundedLabels fails if a label value of any mcpi metric has an
// unsafe shape or contains one of secrets.
func assertBoundedLabels(t *testing.T, all map[string][]obsSeries, secrets ...string) {
	t.Helper()
	for name, ss := range all {
		for _, s := range ss {
			for k, v := range s.labels {
				if !safeLabel.MatchString(v) || strings.Contains(v, "did:") {
					t.Errorf("%s{%s=%q}: unbounded label value", name, k, v)
				}
				for _, sec := range secrets {
					if sec != "" && strings.Contains(sec, v) && len(v) > 8 {
						t.Errorf("%s{%s=%q}: label holds part of a secret", name, k, v)
					}
				}
			}
		}
	}
}

func TestDecisionMetrics(t *testing.T) {
	f := newFixture(t)
	ctx, reg := obsContext(t)
	h, _ := obsHandler(t, ctx, f, nil)

	good := f.jwt(t, nil)
	expired := f.jwt(t, func(tm *vc.Template) {
		tm.NotBefore = time.Now().Add(-2 * time.Hour)
		tm.ExpiresAt = time.Now().Add(-time.Hour)
	})
	forged := obsTamper(good)

	send := func(hdr, val string) {
		r := newRequest(http.MethodGet, "/mcp", "")
		if hdr != "" {
			r.Header.Set(hdr, val)
		}
		serve(t, h, r)
	}
	send("Authorization", "Bearer "+good)
	send("KYA-Delegation", good)
	send("MCP-I-Credential", expired)
	send("KYA-OS-Delegation-Credential", forged)
	send("", "")
	// Outcomes and reasons outside the fixed sets, as a later part might
	// pass by mistake: counted, as "other".
	h.recordDecision(newRequest(http.MethodGet, "/mcp", ""), decision{outcome: "admitted", reason: f.agent.did, status: 200})
	h.recordDecision(newRequest(http.MethodGet, "/mcp", ""), decision{outcome: good, reason: "ok", status: 200})

	all := gatherMCPI(t, reg)
	const dec = "caddy_mcpi_decisions_total"
	for _, c := range []struct {
		outcome, reason string
		want            float64
	}{
		{"admitted", "ok", 2},
		{"rejected", "expired", 1},
		{"rejected", "bad_signature", 1},
		{"rejected", "no_credential", 1},
		{"admitted", "other", 1},
		{"other", "ok", 1},
	} {
		if got := obsValue(all, dec, "outcome", c.outcome, "reason", c.reason); got != c.want {
			t.Errorf("%s{outcome=%q,reason=%q} = %v, want %v", dec, c.outcome, c.reason, got, c.want)
		}
	}
	if n := len(all[dec]); n != 6 {
		t.Errorf("%s has %d obsSeries, want 6: %v", dec, n, all[dec])
	}

	// Four credentials were verified: two passed, two did not (the request
	// without one never reached verification).
	const ver = "caddy_mcpi_verification_duration_seconds"
	if got := obsValue(all, ver, "result", "ok"); got != 2 {
		t.Errorf("%s{result=ok} count = %v, want 2", ver, got)
	}
	if got := obsValue(all, ver, "result", "error"); got != 2 {
		t.Errorf("%s{result=error} count = %v, want 2", ver, got)
	}
	assertBoundedLabels(t, all, good, expired, forged, f.agent.did, f.user.did)

	lintMCPI(t, reg)
}

// TestDecisionReasonsCovered: every reason the handler can reject with, and
// every vc.Reason, is a label value of its own, not "other".
func TestDecisionReasonsCovered(t *testing.T) {
	h := &Handler{}
	errs := []error{errNoCredential, errConflict, errBodyTooLarge, errBodyRead, errForeignBearer, errEdgeIdentity,
		fmt.Errorf("wrapped: %w", errors.New("not a sentinel"))}
	for _, s := range []error{
		vc.ErrTooLarge, vc.ErrMalformed, vc.ErrUnsupportedFormat, vc.ErrAlgorithm, vc.ErrIssuerUnresolved,
		vc.ErrUnknownKey, vc.ErrKeyNotAuthorized, vc.ErrSignature, vc.ErrType, vc.ErrExpired, vc.ErrNotYetValid,
		vc.ErrAudience, vc.ErrUntrustedIssuer, vc.ErrChainIncomplete, vc.ErrChain, vc.ErrStatusUnavailable,
		vc.ErrStatusList, vc.ErrRevoked, vc.ErrMissingScope, vc.ErrPresentationRequired, vc.ErrPresentation,
		vc.ErrHolder, vc.ErrReplay,
	} {
		errs = append(errs, fmt.Errorf("vc: %w", s))
		if r := vc.Reason(s); !decisionReasons[r] {
			t.Errorf("vc.Reason %q is not in decisionReasons", r)
		}
	}
	for _, err := range errs {
		if tag := h.rejectionFor(err).tag; !decisionReasons[tag] {
			t.Errorf("rejection tag %q (for %v) is not in decisionReasons", tag, err)
		}
	}
}

// TestMetricsReprovision: a second Provision in the same registry (another
// mcpi handler of the config, or the same one again) neither fails nor
// panics, and everything counts into the same obsSeries. A new registry (a
// config reload) starts from zero.
func TestMetricsReprovision(t *testing.T) {
	f := newFixture(t)
	ctx, reg := obsContext(t)
	h1, _ := obsHandler(t, ctx, f, nil)
	h2, _ := obsHandler(t, ctx, f, nil)
	rec := func(h *Handler) {
		h.recordDecision(newRequest(http.MethodGet, "/mcp", ""), decision{outcome: "rejected", reason: "expired", status: 401})
		h.metricHandshake("terminate", "ok")
	}
	rec(h1)
	rec(h2)
	h1b, _ := obsHandler(t, ctx, f, nil) // the same config built again (a reload)
	h1 = h1b
	rec(h1)
	all := gatherMCPI(t, reg)
	if got := obsValue(all, "caddy_mcpi_decisions_total", "outcome", "rejected", "reason", "expired"); got != 3 {
		t.Errorf("decisions after re-provision = %v, want 3", got)
	}
	if got := obsValue(all, "caddy_mcpi_handshakes_total", "mode", "terminate", "result", "ok"); got != 3 {
		t.Errorf("handshakes after re-provision = %v, want 3", got)
	}
	if h1.obs.metrics.decisions != h2.obs.metrics.decisions {
		t.Error("two handlers of one registry hold different collectors")
	}

	ctx2, reg2 := obsContext(t)
	h3, _ := obsHandler(t, ctx2, f, nil)
	rec(h3)
	if got := obsValue(gatherMCPI(t, reg2), "caddy_mcpi_decisions_total", "outcome", "rejected", "reason", "expired"); got != 1 {
		t.Errorf("decisions in a fresh registry = %v, want 1", got)
	}
}

// TestMetricsConflictingRegistration: a foreign collector holding one of
// our names with other labels fails Provision instead of panicking.
func TestMetricsConflictingRegistration(t *testing.T) {
	ctx, reg := obsContext(t)
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "caddy_mcpi_decisions_total", Help: "x"}, []string{"foo"}))
	h := &Handler{Config: Config{TrustedIssuers: []string{AnyIssuer}}, registerer: ctx}
	err := h.init()
	if err == nil || !strings.Contains(err.Error(), "registering metrics") {
		t.Fatalf("Provision = %v, want a registration error", err)
	}
}

// TestMetricHelpers: the counters the other parts call, with the label
// values they should pass and with values they must never get through (a
// DID, a token, a URL, a flood of tool names).
func TestMetricHelpers(t *testing.T) {
	f := newFixture(t)
	ctx, reg := obsContext(t)
	h, _ := obsHandler(t, ctx, f, nil)
	tok := f.jwt(t, nil)

	h.metricHandshake("terminate", "ok")
	h.metricHandshake("proxy", "bad_signature")
	h.metricHandshake(tok, f.agent.did)
	h.metricNonceStore("redis", "consume", 3*time.Millisecond, nil)
	h.metricNonceStore("redis", "consume", time.Second, errors.New("i/o timeout"))
	h.metricNonceStore("memory", "put", time.Microsecond, nil)
	h.metricCache("delegation", true)
	h.metricCache("delegation", false)
	h.metricCache("https://evil.example/x", true)
	h.metricDIDError("web", "not_found")
	h.metricDIDError("did:web:evil.example", "fetch")
	h.metricDIDError(f.user.did, "Timeout: "+tok)
	h.metricStatusListError("fetch")
	h.metricStatusListError(tok)
	h.metricToolDecision("read_file", "allowed")
	h.metricToolDecision("delete_file", "denied")
	h.metricToolDecision(tok, "denied")
	for i := range 3 * maxToolValues {
		h.metricToolDecision(fmt.Sprintf("tool_%d", i), "allowed")
	}

	all := gatherMCPI(t, reg)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"caddy_mcpi_handshakes_total", []string{"mode", "terminate", "result", "ok"}, 1},
		{"caddy_mcpi_handshakes_total", []string{"mode", "proxy", "result", "bad_signature"}, 1},
		{"caddy_mcpi_handshakes_total", []string{"mode", "other", "result", "other"}, 1},
		{"caddy_mcpi_nonce_store_duration_seconds", []string{"store", "redis", "op", "consume", "result", "ok"}, 1},
		{"caddy_mcpi_nonce_store_duration_seconds", []string{"store", "redis", "op", "consume", "result", "error"}, 1},
		{"caddy_mcpi_nonce_store_duration_seconds", []string{"store", "memory", "op", "put", "result", "ok"}, 1},
		{"caddy_mcpi_cache_requests_total", []string{"cache", "delegation", "result", "hit"}, 1},
		{"caddy_mcpi_cache_requests_total", []string{"cache", "delegation", "result", "miss"}, 1},
		{"caddy_mcpi_cache_requests_total", []string{"cache", "other", "result", "hit"}, 1},
		{"caddy_mcpi_did_resolution_errors_total", []string{"method", "web", "reason", "not_found"}, 1},
		{"caddy_mcpi_did_resolution_errors_total", []string{"method", "web", "reason", "fetch"}, 1},
		{"caddy_mcpi_did_resolution_errors_total", []string{"method", "key", "reason", "other"}, 1},
		{"caddy_mcpi_status_list_errors_total", []string{"reason", "fetch"}, 1},
		{"caddy_mcpi_status_list_errors_total", []string{"reason", "other"}, 1},
		{"caddy_mcpi_tool_decisions_total", []string{"tool", "read_file", "outcome", "allowed"}, 1},
		{"caddy_mcpi_tool_decisions_total", []string{"tool", "delete_file", "outcome", "denied"}, 1},
		{"caddy_mcpi_tool_decisions_total", []string{"tool", "other", "outcome", "denied"}, 1},
	} {
		if got := obsValue(all, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The flood of tool names is capped: at most maxToolValues distinct
	// names, the rest counted as "other".
	tools := make(map[string]bool)
	for _, s := range all["caddy_mcpi_tool_decisions_total"] {
		tools[s.labels["tool"]] = true
	}
	if len(tools) > maxToolValues+1 {
		t.Errorf("%d distinct tool labels, want at most %d", len(tools), maxToolValues+1)
	}
	if got := obsValue(all, "caddy_mcpi_tool_decisions_total", "tool", "other", "outcome", "allowed"); got < 2*maxToolValues {
		t.Errorf("capped tool names counted as other: %v, want at least %d", got, 2*maxToolValues)
	}
	assertBoundedLabels(t, all, tok, f.agent.did, f.user.did)

	lintMCPI(t, reg)
}

// TestObservabilityNilSafe: every hook works on a handler that was never
// provisioned (as in tests of other parts) and on a nil one.
func TestObservabilityNilSafe(t *testing.T) {
	for _, h := range []*Handler{nil, {}} {
		r := newRequest(http.MethodGet, "/mcp", "")
		if h != nil {
			h.recordDecision(r, decision{outcome: "admitted", reason: "ok", status: 200})
			h.observeVerification(time.Millisecond, nil, nil)
		}
		h.metricHandshake("terminate", "ok")
		h.metricNonceStore("memory", "put", time.Millisecond, nil)
		h.metricCache("delegation", true)
		h.metricDIDError("web", "fetch")
		h.metricStatusListError("fetch")
		h.metricToolDecision("read_file", "allowed")
	}
	// A context without a registry: no metrics, no error.
	h := &Handler{Config: Config{TrustedIssuers: []string{AnyIssuer}}}
	if err := h.provisionObservability(); err != nil {
		t.Fatal(err)
	}
	if h.obs.metrics != nil {
		t.Error("metrics without a registry")
	}
	h.metricHandshake("terminate", "ok")
}

func TestAuditEntries(t *testing.T) {
	f := newFixture(t)
	ctx, _ := obsContext(t)
	h, logs := obsHandler(t, ctx, f, nil)
	good := f.jwt(t, nil)
	forged := obsTamper(good)
	sig := good[strings.LastIndexByte(good, '.')+1:]

	r := newRequest(http.MethodPost, "/mcp/sub?token=querysecret", toolsCallBody)
	r.Header.Set("KYA-Delegation", good)
	r.RemoteAddr = "192.0.2.7:4711"
	serve(t, h, r)

	r = newRequest(http.MethodGet, "/mcp", "")
	r.Header.Set("MCP-I-Credential", forged)
	serve(t, h, r)

	h.recordDecision(newRequest(http.MethodPost, "/mcp", ""), decision{outcome: "denied", reason: "tool_denied", status: 403, tool: "delete_file"})

	entries := logs.FilterLoggerName("http.handlers.mcpi.audit").All()
	if len(entries) != 3 {
		t.Fatalf("%d audit entries, want 3: %v", len(entries), logs.All())
	}
	admitted, rejected, denied := entries[0].ContextMap(), entries[1].ContextMap(), entries[2].ContextMap()
	for _, e := range entries {
		if e.Level != zapcore.InfoLevel || e.Message != auditMessage {
			t.Errorf("entry %v %q, want INFO %q", e.Level, e.Message, auditMessage)
		}
	}

	want := map[string]any{
		"outcome": "admitted", "reason": "ok", "status": int64(200),
		"agent_did": f.agent.did, "user_did": f.user.did, "issuer": f.user.did,
		"delegation_id": "0b6c2b5e-6d3e-4d43-9b6b-1d6c7b0c1a11",
		"carrier":       "kya_delegation",
		"method":        "POST", "host": testHost, "path": "/mcp/sub", "remote_ip": "192.0.2.7",
	}
	for k, v := range want {
		if admitted[k] != v {
			t.Errorf("admitted entry %s = %#v, want %#v", k, admitted[k], v)
		}
	}
	if scopes, _ := admitted["scopes"].([]any); len(scopes) != 2 || scopes[0] != "tools:read" {
		t.Errorf("admitted entry scopes = %#v", admitted["scopes"])
	}
	if id, _ := admitted["request_id"].(string); !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(id) {
		t.Errorf("admitted entry request_id = %#v, want a UUID", admitted["request_id"])
	}
	// The admission of a tools/call names the tool, and every entry the
	// service it is for (the request's origin, no upstream being set).
	if admitted["tool"] != "echo" {
		t.Errorf("admitted entry tool = %#v, want %q", admitted["tool"], "echo")
	}
	for i, e := range []map[string]any{admitted, rejected, denied} {
		if e["upstream"] != "http://"+testHost {
			t.Errorf("entry %d upstream = %#v, want %q", i, e["upstream"], "http://"+testHost)
		}
	}

	if rejected["outcome"] != "rejected" || rejected["reason"] != "bad_signature" || rejected["status"] != int64(401) || rejected["carrier"] != "mcp_i_credential" {
		t.Errorf("rejected entry %v", rejected)
	}
	for _, k := range []string{"agent_did", "user_did", "issuer", "delegation_id", "scopes"} {
		if _, ok := rejected[k]; ok {
			t.Errorf("rejected entry has %s: an unverified credential's claims are not logged", k)
		}
	}
	if denied["outcome"] != "denied" || denied["tool"] != "delete_file" || denied["status"] != int64(403) {
		t.Errorf("denied entry %v", denied)
	}

	// Nothing secret, in any field, as encoded.
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	for i, e := range entries {
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		if err != nil {
			t.Fatal(err)
		}
		line := buf.String()
		for name, s := range map[string]string{"token": good, "forged token": forged, "query": "querysecret"} {
			if strings.Contains(line, s) {
				t.Errorf("audit entry %d contains the %s", i, name)
			}
		}
		for j := 0; j+12 <= len(sig); j++ {
			if strings.Contains(line, sig[j:j+12]) {
				t.Errorf("audit entry %d contains part of the signature", i)
				break
			}
		}
	}
}

// TestToolDenialIsOneDecision: a request whose tools/call the per-tool
// policy denies is one decision, denied: counted once in
// caddy_mcpi_decisions_total (not also as admitted/ok for its verified
// credential) and written once to the audit log, with the delegation and
// carrier of the credential. An allowed call is one admission.
func TestToolDenialIsOneDecision(t *testing.T) {
	f := newFixture(t)
	ctx, reg := obsContext(t)
	h, logs := obsHandler(t, ctx, f, func(h *Handler) { h.Tools = polTools() })
	tok := f.jwt(t, nil) // grants echo:execute, not files:write

	if res := polServe(t, h, polPost(polCall(1, "files_write"), tok), nil); res.called {
		t.Fatal("denied call forwarded")
	}
	all := gatherMCPI(t, reg)
	const dec = "caddy_mcpi_decisions_total"
	if got := obsValue(all, dec, "outcome", "denied", "reason", "insufficient_scope"); got != 1 {
		t.Errorf("%s{denied,insufficient_scope} = %v, want 1", dec, got)
	}
	if n := len(all[dec]); n != 1 {
		t.Errorf("%s has %d series after one denial, want 1: %v", dec, n, all[dec])
	}
	entries := logs.FilterLoggerName("http.handlers.mcpi.audit").All()
	if len(entries) != 1 {
		t.Fatalf("%d audit entries for one denied call, want 1: %v", len(entries), entries)
	}
	e := entries[0].ContextMap()
	for k, v := range map[string]any{
		"outcome": "denied", "reason": "insufficient_scope", "tool": "files_write",
		"carrier": "authorization", "agent_did": f.agent.did, "status": int64(200),
	} {
		if e[k] != v {
			t.Errorf("denial entry %s = %#v, want %#v", k, e[k], v)
		}
	}

	if res := polServe(t, h, polPost(polCall(2, "echo"), tok), nil); !res.called {
		t.Fatalf("allowed call not forwarded: %d", res.rec.Code)
	}
	all = gatherMCPI(t, reg)
	if got := obsValue(all, dec, "outcome", "admitted", "reason", "ok"); got != 1 {
		t.Errorf("%s{admitted,ok} = %v after one allowed call, want 1", dec, got)
	}
	if got := obsValue(all, dec, "outcome", "denied", "reason", "insufficient_scope"); got != 1 {
		t.Errorf("%s{denied,insufficient_scope} = %v, want still 1", dec, got)
	}
	if n := logs.FilterLoggerName("http.handlers.mcpi.audit").Len(); n != 2 {
		t.Errorf("%d audit entries for two requests, want 2", n)
	}
}

func TestAuditLogOff(t *testing.T) {
	f := newFixture(t)
	ctx, reg := obsContext(t)
	h, logs := obsHandler(t, ctx, f, func(h *Handler) { h.observabilityConfig().DisableAuditLog = true })
	r := newRequest(http.MethodGet, "/mcp", "")
	r.Header.Set("Authorization", "Bearer "+f.jwt(t, nil))
	serve(t, h, r)
	if n := logs.FilterLoggerName("http.handlers.mcpi.audit").Len(); n != 0 {
		t.Errorf("%d audit entries with the audit log off", n)
	}
	if got := obsValue(gatherMCPI(t, reg), "caddy_mcpi_decisions_total", "outcome", "admitted", "reason", "ok"); got != 1 {
		t.Errorf("decisions with the audit log off = %v, want 1", got)
	}
}

// TestAuditLogDenials: with audit_log denials, rejections and per-tool
// denials are written and admissions are not; all of them are counted.
func TestAuditLogDenials(t *testing.T) {
	f := newFixture(t)
	ctx, reg := obsContext(t)
	h, logs := obsHandler(t, ctx, f, func(h *Handler) {
		h.Tools = polTools()
		h.observabilityConfig().AuditDenialsOnly = true
	})
	tok := f.jwt(t, nil)
	polServe(t, h, polPost(polCall(1, "echo"), tok), nil)        // admitted
	polServe(t, h, polPost(polCall(2, "files_write"), tok), nil) // denied
	polServe(t, h, polPost(polCall(3, "echo"), ""), nil)         // rejected: no credential

	var outcomes []string
	for _, e := range logs.FilterLoggerName("http.handlers.mcpi.audit").All() {
		outcomes = append(outcomes, e.ContextMap()["outcome"].(string))
	}
	if strings.Join(outcomes, " ") != "denied rejected" {
		t.Errorf("audit entries %q, want the denial and the rejection only", outcomes)
	}
	if got := obsValue(gatherMCPI(t, reg), "caddy_mcpi_decisions_total", "outcome", "admitted", "reason", "ok"); got != 1 {
		t.Errorf("admissions counted %v, want 1", got)
	}

	both := &Handler{Config: Config{TrustedIssuers: []string{AnyIssuer}}}
	both.DisableAuditLog, both.AuditDenialsOnly = true, true
	if err := both.Validate(); err == nil || !strings.Contains(err.Error(), "audit") {
		t.Errorf("Validate with the audit log off and denials only: %v", err)
	}
}

func TestLabelShapes(t *testing.T) {
	for v, want := range map[string]bool{
		"terminate": true, "bad_signature": true, "a1": true, "": false, "Terminate": false,
		"did:web:x": false, "1abc": false, "a.b": false, strings.Repeat("a", 33): false,
	} {
		if got := isSnakeLabel(v); got != want {
			t.Errorf("isSnakeLabel(%q) = %v", v, got)
		}
	}
	for v, want := range map[string]bool{
		"read_file": true, "files.read": true, "get-weather": true, "ns/tool": true, "": false,
		"a b": false, "did:key:z6Mk": false, strings.Repeat("a", 65): false,
	} {
		if got := isToolLabel(v); got != want {
			t.Errorf("isToolLabel(%q) = %v", v, got)
		}
	}
	for in, want := range map[string]string{"web": "web", "did:web": "web", "did:web:example.com": "web", "did:key:z6Mk": "key"} {
		if got := didMethodLabel(in); got != want {
			t.Errorf("didMethodLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
