package edge

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpi-edge/caddy-mcpi/edge/admit"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe/observetest"
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
func obsHandler(t *testing.T, reg prometheus.Registerer, f fixture, mod func(*setup)) (*Handler, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	h := build(t, Config{TrustedIssuers: []string{f.user.did}}, func(c *setup) {
		c.use(WithMetrics(reg), WithHooks(testHooks), WithLogger(zap.New(core).Named("http.handlers.mcpi")))
		if mod != nil {
			mod(c)
		}
	})
	return h, logs
}

// auditLogs are the audit entries written so far, once those queued are.
func auditLogs(t *testing.T, h *Handler, logs *observer.ObservedLogs) *observer.ObservedLogs {
	t.Helper()
	if err := h.obs.Flush(); err != nil {
		t.Fatal(err)
	}
	return logs.FilterLoggerName("http.handlers.mcpi.audit")
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
	h.obs.Decision(newRequest(http.MethodGet, "/mcp", ""), observe.Decision{Outcome: "admitted", Reason: f.agent.did, Status: 200})
	h.obs.Decision(newRequest(http.MethodGet, "/mcp", ""), observe.Decision{Outcome: good, Reason: "ok", Status: 200})

	all := observetest.Gather(t, reg)
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
		if got := observetest.Value(all, dec, "outcome", c.outcome, "reason", c.reason); got != c.want {
			t.Errorf("%s{outcome=%q,reason=%q} = %v, want %v", dec, c.outcome, c.reason, got, c.want)
		}
	}
	if n := len(all[dec]); n != 6 {
		t.Errorf("%s has %d obsSeries, want 6: %v", dec, n, all[dec])
	}

	// Four credentials were verified: two passed, two did not (the request
	// without one never reached verification).
	const ver = "caddy_mcpi_verification_duration_seconds"
	if got := observetest.Value(all, ver, "result", "ok"); got != 2 {
		t.Errorf("%s{result=ok} count = %v, want 2", ver, got)
	}
	if got := observetest.Value(all, ver, "result", "error"); got != 2 {
		t.Errorf("%s{result=error} count = %v, want 2", ver, got)
	}
	observetest.AssertBoundedLabels(t, all, good, expired, forged, f.agent.did, f.user.did)

	observetest.Lint(t, reg)
}

// TestDecisionReasonsCovered: every reason the handler can reject with, and
// every vc.Reason, is a label value of its own, not "other".
func TestDecisionReasonsCovered(t *testing.T) {
	var cfg Config
	errs := []error{carrier.ErrNoCredential, carrier.ErrConflict, carrier.ErrBodyTooLarge, carrier.ErrBodyRead, carrier.ErrForeignBearer, identity.ErrUnavailable,
		carrier.ErrBodyNotJSON, errNotJSONMediaType,
		fmt.Errorf("wrapped: %w", errors.New("not a sentinel")),
		admit.ErrDPoPBearer, admit.ErrDPoPNotBound, dpop.ErrMissing, dpop.ErrMalformed, dpop.ErrAlg, dpop.ErrStale, dpop.ErrMismatch, dpop.ErrReplayed}
	for _, s := range []error{
		vc.ErrTooLarge, vc.ErrMalformed, vc.ErrUnsupportedFormat, vc.ErrAlgorithm, vc.ErrIssuerUnresolved,
		vc.ErrUnknownKey, vc.ErrKeyNotAuthorized, vc.ErrSignature, vc.ErrType, vc.ErrExpired, vc.ErrNotYetValid,
		vc.ErrAudience, vc.ErrUntrustedIssuer, vc.ErrChainIncomplete, vc.ErrChain, vc.ErrStatusUnavailable,
		vc.ErrStatusList, vc.ErrRevoked, vc.ErrMissingScope, vc.ErrPresentationRequired, vc.ErrPresentation,
		vc.ErrHolder, vc.ErrReplay,
	} {
		errs = append(errs, fmt.Errorf("vc: %w", s))
		if r := vc.Reason(s); !observe.IsReason(r) {
			t.Errorf("vc.Reason %q is not in decisionReasons", r)
		}
	}
	for _, err := range errs {
		if tag := cfg.rejectionFor(err).tag; !observe.IsReason(tag) {
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
		h.obs.Decision(newRequest(http.MethodGet, "/mcp", ""), observe.Decision{Outcome: "rejected", Reason: "expired", Status: 401})
		h.obs.Handshake(nil, "terminate", "handshake", "ok", 0, nil)
	}
	rec(h1)
	rec(h2)
	h1b, _ := obsHandler(t, ctx, f, nil) // the same config built again (a reload)
	h1 = h1b
	rec(h1)
	all := observetest.Gather(t, reg)
	if got := observetest.Value(all, "caddy_mcpi_decisions_total", "outcome", "rejected", "reason", "expired"); got != 3 {
		t.Errorf("decisions after re-provision = %v, want 3", got)
	}
	if got := observetest.Value(all, "caddy_mcpi_handshakes_total", "mode", "terminate", "result", "ok"); got != 3 {
		t.Errorf("handshakes after re-provision = %v, want 3", got)
	}

	ctx2, reg2 := obsContext(t)
	h3, _ := obsHandler(t, ctx2, f, nil)
	rec(h3)
	if got := observetest.Value(observetest.Gather(t, reg2), "caddy_mcpi_decisions_total", "outcome", "rejected", "reason", "expired"); got != 1 {
		t.Errorf("decisions in a fresh registry = %v, want 1", got)
	}
}

// TestMetricsConflictingRegistration: a foreign collector holding one of
// our names with other labels fails Provision instead of panicking.
func TestMetricsConflictingRegistration(t *testing.T) {
	ctx, reg := obsContext(t)
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "caddy_mcpi_decisions_total", Help: "x"}, []string{"foo"}))
	_, err := New(Config{TrustedIssuers: []string{AnyIssuer}}, WithMetrics(ctx))
	if err == nil || !strings.Contains(err.Error(), "registering metrics") {
		t.Fatalf("Provision = %v, want a registration error", err)
	}
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

	h.obs.Decision(newRequest(http.MethodPost, "/mcp", ""), observe.Decision{Outcome: "denied", Reason: "tool_denied", Status: 403, Tool: "delete_file"})

	entries := auditLogs(t, h, logs).All()
	if len(entries) != 3 {
		t.Fatalf("%d audit entries, want 3: %v", len(entries), logs.All())
	}
	admitted, rejected, denied := entries[0].ContextMap(), entries[1].ContextMap(), entries[2].ContextMap()
	for _, e := range entries {
		if e.Level != zapcore.InfoLevel || e.Message != observe.AuditMessage {
			t.Errorf("entry %v %q, want INFO %q", e.Level, e.Message, observe.AuditMessage)
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
	h, logs := obsHandler(t, ctx, f, func(c *setup) { c.Tools = polTools() })
	tok := f.jwt(t, nil) // grants echo:execute, not files:write

	if res := polServe(t, h, polPost(polCall(1, "files_write"), tok), nil); res.called {
		t.Fatal("denied call forwarded")
	}
	all := observetest.Gather(t, reg)
	const dec = "caddy_mcpi_decisions_total"
	if got := observetest.Value(all, dec, "outcome", "denied", "reason", "insufficient_scope"); got != 1 {
		t.Errorf("%s{denied,insufficient_scope} = %v, want 1", dec, got)
	}
	if n := len(all[dec]); n != 1 {
		t.Errorf("%s has %d series after one denial, want 1: %v", dec, n, all[dec])
	}
	entries := auditLogs(t, h, logs).All()
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
	all = observetest.Gather(t, reg)
	if got := observetest.Value(all, dec, "outcome", "admitted", "reason", "ok"); got != 1 {
		t.Errorf("%s{admitted,ok} = %v after one allowed call, want 1", dec, got)
	}
	if got := observetest.Value(all, dec, "outcome", "denied", "reason", "insufficient_scope"); got != 1 {
		t.Errorf("%s{denied,insufficient_scope} = %v, want still 1", dec, got)
	}
	if n := auditLogs(t, h, logs).Len(); n != 2 {
		t.Errorf("%d audit entries for two requests, want 2", n)
	}
}

func TestAuditLogOff(t *testing.T) {
	f := newFixture(t)
	ctx, reg := obsContext(t)
	h, logs := obsHandler(t, ctx, f, func(c *setup) { (&c.ObservabilityConfig).DisableAuditLog = true })
	r := newRequest(http.MethodGet, "/mcp", "")
	r.Header.Set("Authorization", "Bearer "+f.jwt(t, nil))
	serve(t, h, r)
	if n := auditLogs(t, h, logs).Len(); n != 0 {
		t.Errorf("%d audit entries with the audit log off", n)
	}
	if got := observetest.Value(observetest.Gather(t, reg), "caddy_mcpi_decisions_total", "outcome", "admitted", "reason", "ok"); got != 1 {
		t.Errorf("decisions with the audit log off = %v, want 1", got)
	}
}

// TestAuditLogDenials: with audit_log denials, rejections and per-tool
// denials are written and admissions are not; all of them are counted.
func TestAuditLogDenials(t *testing.T) {
	f := newFixture(t)
	ctx, reg := obsContext(t)
	h, logs := obsHandler(t, ctx, f, func(c *setup) {
		c.Tools = polTools()
		(&c.ObservabilityConfig).AuditDenialsOnly = true
	})
	tok := f.jwt(t, nil)
	polServe(t, h, polPost(polCall(1, "echo"), tok), nil)        // admitted
	polServe(t, h, polPost(polCall(2, "files_write"), tok), nil) // denied
	polServe(t, h, polPost(polCall(3, "echo"), ""), nil)         // rejected: no credential

	var outcomes []string
	for _, e := range auditLogs(t, h, logs).All() {
		outcomes = append(outcomes, e.ContextMap()["outcome"].(string))
	}
	if strings.Join(outcomes, " ") != "denied rejected" {
		t.Errorf("audit entries %q, want the denial and the rejection only", outcomes)
	}
	if got := observetest.Value(observetest.Gather(t, reg), "caddy_mcpi_decisions_total", "outcome", "admitted", "reason", "ok"); got != 1 {
		t.Errorf("admissions counted %v, want 1", got)
	}

	both := Config{TrustedIssuers: []string{AnyIssuer}}
	both.DisableAuditLog, both.AuditDenialsOnly = true, true
	if err := both.Validate(); err == nil || !strings.Contains(err.Error(), "audit") {
		t.Errorf("Validate with the audit log off and denials only: %v", err)
	}
}

// upstreamName keeps the origin it built last: requests for another host
// or scheme, and back, each get their own.
func TestUpstreamNameFollowsHost(t *testing.T) {
	h := newFixture(t).handler(t, nil)
	for _, tc := range []struct {
		host string
		tls  bool
		want string
	}{
		{"a.example", false, "http://a.example"},
		{"a.example", false, "http://a.example"},
		{"a.example", true, "https://a.example"},
		{"B.example:8443", true, "https://b.example:8443"},
		{"a.example", false, "http://a.example"},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://"+tc.host+"/mcp", nil)
		if tc.tls {
			r.TLS = &tls.ConnectionState{}
		}
		if got := h.upstreamName(r); got != tc.want {
			t.Errorf("%s (TLS %v): upstream %q, want %q", tc.host, tc.tls, got, tc.want)
		}
	}
}
