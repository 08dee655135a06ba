package edge

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestWellKnownMCP: a route that enforces the extension answers GET and
// HEAD /.well-known/mcp itself, without a credential, with its DID, the
// audience proofs must name and the extension's settings; under the
// default the path is the upstream's (behind the credential), and other
// methods are not answered by the edge.
func TestWellKnownMCP(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		name     string
		mod      func(*setup)
		served   bool
		did, aud string
		required bool
	}{
		{"default", nil, false, "", "", false},
		{"required proofs", func(c *setup) { c.RequestProof = "required" }, true, testAudience, testAudience, false},
		{"require_extension", func(c *setup) { c.RequireExtension = true; c.EdgeDID = "did:web:edge.example" }, true, "did:web:edge.example", "did:web:edge.example", true},
		{"sign", func(c *setup) { c.Level = 2; c.ResponseProof = "sign"; c.EdgeDID = "did:web:edge.example" }, true, "did:web:edge.example", "did:web:edge.example", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := f.handler(t, c.mod)
			res := serve(t, h, newRequest(http.MethodGet, "/.well-known/mcp", ""))
			if !c.served {
				// The upstream's path, behind the credential like any other.
				if res.rec.Code != http.StatusUnauthorized {
					t.Fatalf("%d %s", res.rec.Code, res.rec.Body)
				}
				return
			}
			if res.called {
				t.Fatal("forwarded")
			}
			var doc struct {
				DID              string
				Audience         string
				ClockSkewSeconds int
				Extensions       map[string]struct {
					Required      bool
					ProofProfiles []string
				}
			}
			if err := json.Unmarshal(res.rec.Body.Bytes(), &doc); err != nil || res.rec.Code != http.StatusOK {
				t.Fatalf("%v %d %s", err, res.rec.Code, res.rec.Body)
			}
			ext, ok := doc.Extensions["org.kya-os/decentralized-authority"]
			if doc.DID != c.did || doc.Audience != c.aud || !ok || ext.Required != c.required ||
				len(ext.ProofProfiles) == 0 || doc.ClockSkewSeconds < 30 || doc.ClockSkewSeconds > 600 {
				t.Fatalf("%s", res.rec.Body)
			}
			if head := serve(t, h, newRequest(http.MethodHead, "/.well-known/mcp", "")); head.called || head.rec.Code != http.StatusOK {
				t.Fatalf("HEAD: %v %d", head.called, head.rec.Code)
			}
			if post := serve(t, h, newRequest(http.MethodPost, "/.well-known/mcp", "{}")); post.rec.Code == http.StatusOK && !post.called {
				t.Fatalf("POST answered by the edge: %s", post.rec.Body)
			}
		})
	}
}
