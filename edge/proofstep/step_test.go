package proofstep

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/framing"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
)

// newStep is a step over a gate with cfg, at a route of route.
func newStep(cfg proof.Config, route Route) *Step {
	return New(proof.New(cfg, nil, nil), route, Parts{Site: site.New(nil, nil)})
}

// body is the framing step's reading of raw.
func body(raw string) *framing.Body {
	var rb framing.Body
	if raw != "" {
		rb.Use([]byte(raw))
	}
	return &rb
}

// TestNegotiateRefusals: an undeclared or unreadable body is refused with
// a typed refusal whose body answers the request the way it came: a
// JSON-RPC error with its id, id null for a batch or a body that is not
// JSON-RPC, {"error": reason} for a notification; a declared request, a
// server/discover and a request without a body pass.
func TestNegotiateRefusals(t *testing.T) {
	p := newStep(proof.Config{RequireExtension: true}, Route{})
	declared := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"org.kya-os/decentralized-authority":{}}}}}}`
	for _, c := range []struct {
		name, body string
		status     int // 0: passes
		reason     string
		want       string // the refusal's body, as a prefix
	}{
		{"request", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}`, http.StatusOK, "extension_not_declared", `{"jsonrpc":"2.0","id":7,"error":{"code":-32021,`},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`, http.StatusOK, "extension_not_declared", `{"jsonrpc":"2.0","id":"a","error":{"code":-32021,`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusOK, "extension_not_declared", `{"error":"extension_not_declared"}`},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, http.StatusOK, "extension_not_declared", `{"jsonrpc":"2.0","id":null,"error":{"code":-32021,`},
		{"not JSON", `{"jsonrpc":`, http.StatusBadRequest, "invalid_request", `{"jsonrpc":"2.0","id":null,"error":{`},
		{"repeated member", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}`, http.StatusBadRequest, "invalid_request", `{"jsonrpc":"2.0","id":null,"error":{`},
		{"declared", declared, 0, "", ""},
		{"server/discover", `{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}`, 0, "", ""},
		{"no body", "", 0, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "https://edge.test/mcp", strings.NewReader(c.body))
			err := p.Negotiate(r, body(c.body))
			if c.status == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			rf, ok := refusal.As(err)
			if !ok {
				t.Fatalf("got %v, want a *refusal.Refusal", err)
			}
			if rf.Status != c.status || rf.Reason != c.reason || !strings.HasPrefix(string(rf.Body), c.want) || !json.Valid(rf.Body) {
				t.Fatalf("%d %q %s; want %d %q %s…", rf.Status, rf.Reason, rf.Body, c.status, c.reason, c.want)
			}
		})
	}
}

// TestNegotiateOffWithoutRequirement: without require_extension nothing is
// refused, whatever the body.
func TestNegotiateOffWithoutRequirement(t *testing.T) {
	p := newStep(proof.Config{}, Route{})
	r := httptest.NewRequest(http.MethodPost, "https://edge.test/mcp", nil)
	if err := p.Negotiate(r, body(`{"jsonrpc":`)); err != nil {
		t.Fatal(err)
	}
}

// TestAdmitRequiredWithoutProof: under required, a request with no proof
// is refused (401, proof_missing, a JSON-RPC error with its id), a ping is
// not, and under off the gate reads nothing.
func TestAdmitRequiredWithoutProof(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo"}}`
	r := httptest.NewRequest(http.MethodPost, "https://edge.test/mcp", nil)
	p := newStep(proof.Config{RequestProof: proof.Required}, Route{})
	ok, err := p.Admit(r, body(call), nil)
	rf, refused := refusal.As(err)
	if ok || !refused || rf.Status != http.StatusUnauthorized || rf.Reason != "proof_missing" || !strings.HasPrefix(string(rf.Body), `{"jsonrpc":"2.0","id":9,"error":{"code":-31000,`) {
		t.Fatalf("no proof: %v %v", ok, err)
	}
	if ok, err := p.Admit(r, body(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), nil); ok || err != nil {
		t.Fatalf("ping: %v %v", ok, err)
	}
	off := newStep(proof.Config{RequestProof: proof.Off}, Route{})
	if ok, err := off.Admit(r, body(call), nil); ok || err != nil {
		t.Fatalf("off: %v %v", ok, err)
	}
}

// TestAudience: upstream_did, else edge_did, else did:web of the Host.
func TestAudience(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "https://edge.test/mcp", nil)
	for _, c := range []struct {
		route Route
		want  string
	}{
		{Route{UpstreamDID: "did:web:up.test", EdgeDID: "did:web:edge.test"}, "did:web:up.test"},
		{Route{EdgeDID: "did:web:edge.example"}, "did:web:edge.example"},
		{Route{}, "did:web:edge.test"},
	} {
		if got := newStep(proof.Config{}, c.route).Audience(r); got != c.want {
			t.Errorf("%+v: %q, want %q", c.route, got, c.want)
		}
	}
}
