package observe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe/observetest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricHelpers: the counters the other parts call, with the label
// values they should pass and with values they must never get through (a
// DID, a token, a URL, a flood of tool names).
func TestMetricHelpers(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec, err := New(Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	const tok = testToken
	agentDID, userDID := testAgentDID, testUserDID

	rec.countHandshake("terminate", "ok")
	rec.countHandshake("proxy", "bad_signature")
	rec.countHandshake(tok, agentDID)
	rec.NonceStore("redis", "consume", 3*time.Millisecond, nil)
	rec.NonceStore("redis", "consume", time.Second, errors.New("i/o timeout"))
	rec.NonceStore("memory", "put", time.Microsecond, nil)
	rec.Cache("delegation", true)
	rec.Cache("delegation", false)
	rec.Cache("https://evil.example/x", true)
	rec.DIDError("web", "not_found")
	rec.DIDError("did:web:evil.example", "fetch")
	rec.DIDError(userDID, "Timeout: "+tok)
	rec.StatusListError("fetch")
	rec.StatusListError(tok)
	rec.ToolDecision("read_file", "allowed")
	rec.ToolDecision("delete_file", "denied")
	rec.ToolDecision(tok, "denied")
	for i := range 3 * maxToolValues {
		rec.ToolDecision(fmt.Sprintf("tool_%d", i), "allowed")
	}

	all := observetest.Gather(t, reg)
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
		if got := observetest.Value(all, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The flood of tool names is capped: at most maxToolValues distinct
	// names, the rest counted as "other".
	tools := make(map[string]bool)
	for _, s := range all["caddy_mcpi_tool_decisions_total"] {
		tools[s.Labels["tool"]] = true
	}
	if len(tools) > maxToolValues+1 {
		t.Errorf("%d distinct tool labels, want at most %d", len(tools), maxToolValues+1)
	}
	if got := observetest.Value(all, "caddy_mcpi_tool_decisions_total", "tool", "other", "outcome", "allowed"); got < 2*maxToolValues {
		t.Errorf("capped tool names counted as other: %v, want at least %d", got, 2*maxToolValues)
	}
	observetest.AssertBoundedLabels(t, all, tok, agentDID, userDID)

	observetest.Lint(t, reg)
}

// TestObservabilityNilSafe: every method works on a nil Recorder and on
// an empty one (no registry, no logger).
func TestObservabilityNilSafe(t *testing.T) {
	for _, rec := range []*Recorder{nil, {}} {
		r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		rec.Decision(r, Decision{Outcome: "admitted", Reason: "ok", Status: 200})
		rec.Verification(time.Millisecond, nil, nil)
		rec.Handshake(r, "terminate", "verify", "ok", 200, nil)
		rec.countHandshake("terminate", "ok")
		rec.NonceStore("memory", "put", time.Millisecond, nil)
		rec.Cache("delegation", true)
		rec.DIDError("web", "fetch")
		rec.StatusListError("fetch")
		rec.ToolDecision("read_file", "allowed")
	}
	// Without a registry: no metrics, no error.
	rec, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.metrics != nil {
		t.Error("metrics without a registry")
	}
	rec.countHandshake("terminate", "ok")
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

// TestDIDErrorLabels: DID resolution failures are tagged by the resolver's
// sentinel, and the method by what the credential claims, from fixed sets.
func TestDIDErrorLabels(t *testing.T) {
	for err, want := range map[error]string{
		didresolver.ErrNotFound:          "not_found",
		didresolver.ErrFetch:             "fetch",
		didresolver.ErrTooLarge:          "too_large",
		didresolver.ErrForbiddenAddress:  "forbidden_address",
		didresolver.ErrInvalidDocument:   "invalid_document",
		didresolver.ErrIDMismatch:        "id_mismatch",
		didresolver.ErrInvalidDID:        "invalid_did",
		didresolver.ErrUnsupportedMethod: "unsupported_method",
		context.DeadlineExceeded:         "timeout",
		errors.New("x"):                  "other",
	} {
		if got := didErrorReason(fmt.Errorf("%w: %w", vc.ErrIssuerUnresolved, err)); got != want {
			t.Errorf("didErrorReason(%v) = %q, want %q", err, got, want)
		}
	}
	for raw, want := range map[string]string{"": "unknown", `{"issuer":"did:foo:x"}`: "other", `{"issuer":{"id":"did:web:example.com"}}`: "web"} {
		if got := claimedDIDMethod([]byte(raw)); got != want {
			t.Errorf("claimedDIDMethod(%s) = %q, want %q", raw, got, want)
		}
	}
}

// Values no label may ever hold.
const (
	testToken    = "eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJkaWQ6a2V5Ono2TWtoIn0.c2lnbmF0dXJlc2lnbmF0dXJl"
	testAgentDID = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
	testUserDID  = "did:key:z6MkjchhfUsD6mmvni8mCdXHw216Xrm9bQe2mBH1P5RDjVJG"
)
