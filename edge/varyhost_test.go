package edge

import (
	"net/http"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/edge/wellknown"
)

// TestHostDerivedDocumentsVaryHost: a cacheable document the
// edge derives from the Host says so with Vary: Host, so that a shared
// cache does not serve one Host's DID or resource URL for another; one that
// does not depend on the Host does not split caches for nothing.
func TestHostDerivedDocumentsVaryHost(t *testing.T) {
	f := newFixture(t)
	get := func(t *testing.T, h *Handler, path, host string) (string, http.Header) {
		t.Helper()
		r := newRequest(http.MethodGet, path, "")
		if host != "" {
			r.Host = host
		}
		res := serve(t, h, r)
		if res.called || res.rec.Code != http.StatusOK {
			t.Fatalf("GET %s (Host %q): HTTP %d, forwarded %v", path, host, res.rec.Code, res.called)
		}
		return res.rec.Body.String(), res.rec.Header()
	}
	for _, c := range []struct {
		name string
		h    *Handler
		path string
		vary bool
	}{
		{"resource metadata", f.handler(t, nil), site.WellKnownResource, true},
		{"/.well-known/mcp, DID from the Host", f.handler(t, func(c *setup) { c.RequestProof = "required" }), wellknown.WellKnownMCP, true},
		{"/.well-known/mcp, edge_did set", f.handler(t, func(c *setup) { c.RequestProof = "required"; c.EdgeDID = "did:web:edge.example" }), wellknown.WellKnownMCP, false},
		{"jwks.json", f.l2Handler(t, nil, nil), identity.JWKSPath, true},
		{"did.json", f.l2Handler(t, nil, nil), "/.well-known/did.json", true},
		{"mcp-i.json", f.l3Handler(t, nil), wellknown.WellKnownMCPI, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, hdr := get(t, c.h, c.path, "")
			other, _ := get(t, c.h, c.path, "other.example")
			if got := hdr.Values("Vary"); c.vary != (len(got) == 1 && got[0] == "Host") {
				t.Errorf("Vary %q, want Host: %v", got, c.vary)
			}
			if hdr.Get("Cache-Control") == "" {
				t.Error("no Cache-Control")
			}
			// The test's premise: the body varies exactly when Vary says so.
			if (body != other) != c.vary {
				t.Errorf("body differs by Host: %v, Vary: Host %v\n%s\n%s", body != other, c.vary, body, other)
			}
		})
	}
}
