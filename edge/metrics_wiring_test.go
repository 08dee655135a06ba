package edge

import (
	"context"
	"errors"
	"fmt"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe/observetest"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// handshakeAudit returns the audit entries of handshake and verify calls,
// once h's background writer has written what it queued.
func handshakeAudit(t testing.TB, h *Handler, logs *observer.ObservedLogs) []observer.LoggedEntry {
	t.Helper()
	if err := h.obs.Flush(); err != nil {
		t.Fatalf("flushing the audit log: %v", err)
	}
	var out []observer.LoggedEntry
	for _, e := range logs.FilterLoggerName("http.handlers.mcpi.audit").All() {
		if _, ok := e.ContextMap()["handshake"]; ok {
			out = append(out, e)
		}
	}
	return out
}

// TestHandshakeMetricsTerminate: a terminated handshake, its verify and a
// replay of the verify are counted by result, their nonce store operations
// timed, and each has one audit entry without anything secret.
func TestHandshakeMetricsTerminate(t *testing.T) {
	f := newFixture(t)
	ctx, reg := obsContext(t)
	h, logs := obsHandler(t, ctx, f, func(c *setup) { c.Level = 3 })
	cred := f.jwt(t, nil)

	hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
	sc := answer(t, f.agent, hr)
	if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, sc, cred), nil); rep.Error != nil {
		t.Fatalf("verify: %s", rep.Raw)
	}
	if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(3, sc, cred), nil); rep.code() != challenge.CodeReplay {
		t.Fatalf("replay: %s", rep.Raw)
	}
	if rep := rpcCall(t, h, defaultHandshakePath, handshakeMsg(4, "not a did"), nil); rep.code() != challenge.CodeInvalidParams {
		t.Fatalf("bad params: %s", rep.Raw)
	}

	all := observetest.Gather(t, reg)
	const hs = "caddy_mcpi_handshakes_total"
	for _, c := range []struct {
		result string
		want   float64
	}{{"issued", 1}, {"verified", 1}, {"replay", 1}, {"invalid_params", 1}} {
		if got := observetest.Value(all, hs, "mode", "terminate", "result", c.result); got != c.want {
			t.Errorf("%s{terminate,%s} = %v, want %v", hs, c.result, got, c.want)
		}
	}
	if n := len(all[hs]); n != 4 {
		t.Errorf("%s has %d series, want 4: %v", hs, n, all[hs])
	}
	// A handshake call is no admission decision of a request.
	if n := len(all["caddy_mcpi_decisions_total"]); n != 0 {
		t.Errorf("handshake calls counted as decisions: %v", all["caddy_mcpi_decisions_total"])
	}
	// The handshake writes nothing (its challenge is a MAC); the verify and
	// the replay each mark the answer used, measured as a "put" (the
	// replay's "already used" is a normal answer of the store, not an
	// error); nothing is peeked or consumed.
	const ns = "caddy_mcpi_nonce_store_duration_seconds"
	for _, c := range []struct {
		op   string
		want float64
	}{{"put", 2}, {"peek", 0}, {"consume", 0}} {
		if got := observetest.Value(all, ns, "store", "memory", "op", c.op, "result", "ok"); got != c.want {
			t.Errorf("%s{memory,%s,ok} = %v, want %v", ns, c.op, got, c.want)
		}
	}
	observetest.AssertBoundedLabels(t, all, cred, hr.Nonce, hr.Challenge, f.agent.did)

	entries := handshakeAudit(t, h, logs)
	if len(entries) != 4 {
		t.Fatalf("%d handshake audit entries, want 4: %v", len(entries), logs.All())
	}
	for i, want := range []struct {
		outcome, reason, call string
		agent                 bool
	}{
		{"admitted", "issued", "handshake", false},
		{"admitted", "verified", "verify", true},
		{"rejected", "replay", "verify", false},
		{"rejected", "invalid_params", "handshake", false},
	} {
		m := entries[i].ContextMap()
		if m["outcome"] != want.outcome || m["reason"] != want.reason || m["call"] != want.call ||
			m["handshake"] != "terminate" || m["status"] != int64(http.StatusOK) {
			t.Errorf("entry %d: %v, want %+v", i, m, want)
		}
		if _, ok := m["agent_did"]; ok != want.agent {
			t.Errorf("entry %d: agent_did present %t, want %t", i, ok, want.agent)
		}
		if want.agent && (m["agent_did"] != f.agent.did || m["user_did"] != f.user.did) {
			t.Errorf("entry %d: agent_did %v user_did %v", i, m["agent_did"], m["user_did"])
		}
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	for i, e := range entries {
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		if err != nil {
			t.Fatal(err)
		}
		line := buf.String()
		for name, s := range map[string]string{
			"nonce": hr.Nonce, "challenge": hr.Challenge, "proof": sc.ProofValue, "credential": cred,
		} {
			if s != "" && strings.Contains(line, s) {
				t.Errorf("audit entry %d contains the %s: %s", i, name, line)
			}
		}
	}
}

// TestHandshakeMetricsProxy: in proxy mode the forwarded handshake and the
// verify checked at the edge and forwarded count under mode "proxy".
func TestHandshakeMetricsProxy(t *testing.T) {
	f := newFixture(t)
	ctx, reg := obsContext(t)
	up := newFakeUpstream(t, "/rpc/hs", "/rpc/vf")
	next := up.handler()
	h, logs := obsHandler(t, ctx, f, func(c *setup) {
		c.Level, c.Handshake, c.HandshakeEndpoint, c.VerifyEndpoint = 3, HandshakeProxy, "/rpc/hs", "/rpc/vf"
	})
	cred := f.jwt(t, nil)

	hr := doHandshake(t, h, defaultHandshakePath, f.agent, next)
	sc := answer(t, f.agent, hr)
	if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, sc, cred), next); rep.Error != nil || !rep.Next {
		t.Fatalf("verify: %s", rep.Raw)
	}
	if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(3, sc, cred), next); rep.code() != challenge.CodeReplay {
		t.Fatalf("replay: %s", rep.Raw)
	}

	all := observetest.Gather(t, reg)
	for _, result := range []string{"issued", "verified", "replay"} {
		if got := observetest.Value(all, "caddy_mcpi_handshakes_total", "mode", "proxy", "result", result); got != 1 {
			t.Errorf("handshakes_total{proxy,%s} = %v, want 1", result, got)
		}
	}
	entries := handshakeAudit(t, h, logs)
	if len(entries) != 3 {
		t.Fatalf("%d handshake audit entries, want 3", len(entries))
	}
	if m := entries[1].ContextMap(); m["handshake"] != "proxy" || m["reason"] != "verified" || m["agent_did"] != f.agent.did {
		t.Errorf("proxied verify entry %v", m)
	}
	// The edge reads the upstream's answer (to bind its session), so the
	// entry has the upstream's status.
	if st, _ := entries[1].ContextMap()["status"].(int64); st != http.StatusOK {
		t.Errorf("forwarded verify entry status %v, want the upstream's 200", entries[1].ContextMap()["status"])
	}
}

// failingStore fails every operation as an unreachable store does.
type failingStore struct{}

func (failingStore) Put(context.Context, string, challenge.Record, time.Duration) error {
	return fmt.Errorf("%w: dial tcp: refused", challenge.ErrStoreUnavailable)
}

func (failingStore) Consume(context.Context, string) (challenge.Record, error) {
	return challenge.Record{}, challenge.ErrStoreFull
}

// TestNonceStoreMetrics: the provisioned store is measured under its module
// name; a missing or present nonce is an ok answer, a request that ended
// is request_ended, a store failure an error.
func TestNonceStoreMetrics(t *testing.T) {
	f := newFixture(t)
	ctx, reg := obsContext(t)
	h, _ := obsHandler(t, ctx, f, func(c *setup) {
		c.Level = 3
		useStore(challenge.NewMemoryStore(bareContext(t)), "memory")(c)
	})
	s := h.nonces
	bg := context.Background()
	rec := challenge.Record{Challenge: "abc", IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
	if err := s.Put(bg, "n1", rec, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(bg, "n1", rec, time.Minute); !errors.Is(err, challenge.ErrNonceExists) {
		t.Fatalf("second Put = %v", err)
	}
	if _, err := s.Consume(bg, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Consume(bg, "n1"); !errors.Is(err, challenge.ErrNonceNotFound) {
		t.Fatalf("second Consume = %v", err)
	}
	// A request that ended is refused, but is no failure of the store.
	left, cancel := context.WithCancel(bg)
	cancel()
	if err := s.(challenge.SingleUse).UseOnce(left, [32]byte{1}, time.Minute); !errors.Is(err, challenge.ErrRequestEnded) {
		t.Fatalf("UseOnce of a request that ended = %v, want ErrRequestEnded", err)
	}
	down := &measuredNonceStore{store: failingStore{}, name: "redis", obs: h.obs}
	if err := down.Put(bg, "n2", rec, time.Minute); !errors.Is(err, challenge.ErrStoreUnavailable) {
		t.Fatalf("Put on a failing store = %v", err)
	}
	if _, err := down.Consume(bg, "n2"); !errors.Is(err, challenge.ErrStoreFull) {
		t.Fatalf("Consume on a failing store = %v", err)
	}

	all := observetest.Gather(t, reg)
	const ns = "caddy_mcpi_nonce_store_duration_seconds"
	for _, c := range []struct {
		store, op, result string
		want              float64
	}{
		{"memory", "put", "ok", 2},
		{"memory", "put", "request_ended", 1},
		{"memory", "consume", "ok", 2},
		{"redis", "put", "error", 1},
		{"redis", "consume", "error", 1},
	} {
		if got := observetest.Value(all, ns, "store", c.store, "op", c.op, "result", c.result); got != c.want {
			t.Errorf("%s{%s,%s,%s} = %v, want %v", ns, c.store, c.op, c.result, got, c.want)
		}
	}
	if got := observetest.Value(all, ns, "store", "memory", "op", "put", "result", "error") +
		observetest.Value(all, ns, "store", "memory", "op", "consume", "result", "error"); got != 0 {
		t.Errorf("normal answers counted as store errors: %v", got)
	}
}

// TestNonceStoreMetricsRedis: a Redis store is labelled "redis", and the
// presentation replay guard's Put goes through the measured store too.
func TestNonceStoreMetricsRedis(t *testing.T) {
	f := newFixture(t)
	redis := redistest.Start(t)
	ctx, reg := obsContext(t)
	h, _ := obsHandler(t, ctx, f, func(c *setup) {
		c.Level = 3
		useStore(redisStore(t, redis.Addr(), 0), "redis")(c)
	})
	wantAdmitted(t, serve(t, h, bearer(vpOf(t, f.agent, "", nil, f.jwt(t, nil)))))
	const ns = "caddy_mcpi_nonce_store_duration_seconds"
	if got := observetest.Value(observetest.Gather(t, reg), ns, "store", "redis", "op", "put", "result", "ok"); got != 1 {
		t.Errorf("%s{redis,put,ok} = %v, want 1 (the replay guard)", ns, got)
	}
}

// TestDIDResolutionErrorMetric: a trusted did:web issuer whose document
// cannot be fetched is counted by method and reason.
func TestDIDResolutionErrorMetric(t *testing.T) {
	f := newFixture(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there any more
	issuer := fmt.Sprintf("did:web:127.0.0.1%%3A%d", port)
	if _, err := didresolver.ParseDID(issuer); err != nil {
		t.Fatal(err)
	}

	ctx, reg := obsContext(t)
	h, _ := obsHandler(t, ctx, f, func(c *setup) {
		c.AllowPrivateDIDWeb = true
		c.TrustedIssuers = append(c.TrustedIssuers, issuer)
	})
	tok, err := vc.IssueJWT(f.user.priv, issuer+"#key-1", f.template(nil))
	if err != nil {
		t.Fatal(err)
	}
	res := serve(t, h, bearer(tok))
	if res.called {
		t.Fatal("credential of an unresolvable issuer admitted")
	}
	// A credential that resolves counts nothing.
	wantAdmitted(t, serve(t, h, bearer(f.jwt(t, nil))))

	all := observetest.Gather(t, reg)
	const de = "caddy_mcpi_did_resolution_errors_total"
	if got := observetest.Value(all, de, "method", "web", "reason", "fetch"); got != 1 {
		t.Errorf("%s{web,fetch} = %v, want 1: %v", de, got, all[de])
	}
	if n := len(all[de]); n != 1 {
		t.Errorf("%s has %d series, want 1: %v", de, n, all[de])
	}
	if got := observetest.Value(all, "caddy_mcpi_decisions_total", "outcome", "rejected", "reason", "issuer_unresolved"); got != 1 {
		t.Errorf("decisions{rejected,issuer_unresolved} = %v, want 1", got)
	}
	observetest.AssertBoundedLabels(t, all, tok, issuer)
}

func TestHandshakeResultTags(t *testing.T) {
	for err, want := range map[error]string{
		challenge.ErrParse:                                 "parse_error",
		challenge.ErrInvalidRequest:                        "invalid_request",
		challenge.ErrMethodNotFound:                        "method_not_found",
		challenge.ErrInvalidParams:                         "invalid_params",
		challenge.ErrStoreFull:                             "store_full",
		challenge.ErrStoreUnavailable:                      "store_unavailable",
		challenge.ErrExpired:                               "expired",
		challenge.ErrBadProof:                              "bad_proof",
		challenge.ErrReplay:                                "replay",
		challenge.ErrNonceNotFound:                         "replay",
		challenge.ErrUntrustedCredential:                   "untrusted_credential",
		handshake.ErrResponseTooLarge:                      "upstream_error",
		fmt.Errorf("%w: x", handshake.ErrUpstreamResponse): "upstream_error",
		errors.New("something else"):                       "internal_error",
	} {
		wrapped := fmt.Errorf("ctx: %w", err)
		if got := handshake.ResultTag(wrapped); got != want {
			t.Errorf("handshake.ResultTag(%v) = %q, want %q", err, got, want)
		}
		if !observe.IsReason(want) && want != "issued" && want != "verified" && !snakeLabel.MatchString(want) {
			t.Errorf("%q is not a valid label value", want)
		}
	}
}

// snakeLabel is the shape of a bounded label value.
var snakeLabel = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
