package integration

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/mcpiverify"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// level2Headers are the identity headers the edge injects in the MCP-I
// profile, canonical spelling, sorted as identityHeaders returns them.
var level2Headers = []string{"X-Agent-Did", "X-User-Did", "X-Verified-Delegation"}

// TestLevel2IdentityHeaders: at level 2 the upstream (a real Go-SDK MCP
// server) sees exactly the verified DIDs, whatever the client forged, and an
// X-Verified-Delegation that any JOSE library verifies against the edge's
// JWKS, and that mcpiverify accepts.
func TestLevel2IdentityHeaders(t *testing.T) {
	e := newLevel2Edge(t, "level 2")
	h := e.harness
	w := newWorld(t, h)
	tok := w.jwt(t)
	hdr := spoofHeaders.Clone()
	hdr["Authorization"] = []string{"Bearer " + tok}

	ctx := testContext(t)
	cs := h.mustConnect(ctx, "/mcp", hdr, legacyProtocol, nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil || res.IsError {
		t.Fatalf("whoami: %v %+v", err, res)
	}
	if id, _ := res.StructuredContent.(map[string]any); id["agent_did"] != w.agent.did || id["user_did"] != w.user.did ||
		id["verified_delegation"] != true || id["reputation_score"] != nil {
		t.Errorf("whoami = %v, want agent %s user %s and a verified delegation", id, w.agent.did, w.user.did)
	}
	reqs := h.upstream.Requests()
	if len(reqs) == 0 {
		t.Fatal("upstream saw nothing")
	}
	var proof string
	for i, r := range reqs {
		if got := identityHeaders(r.Header); !slices.Equal(got, level2Headers) {
			t.Errorf("upstream request %d (%s) identity headers %v, want %v", i, r.Method, got, level2Headers)
		}
		if got := r.Header["X-Agent-Did"]; len(got) != 1 || got[0] != w.agent.did {
			t.Errorf("upstream request %d X-Agent-DID = %q", i, got)
		}
		if got := r.Header["X-User-Did"]; len(got) != 1 || got[0] != w.user.did {
			t.Errorf("upstream request %d X-User-DID = %q", i, got)
		}
		if got := r.Header["X-Verified-Delegation"]; len(got) != 1 || strings.Count(got[0], ".") != 2 {
			t.Errorf("upstream request %d X-Verified-Delegation = %q", i, got)
		} else {
			proof = got[0]
		}
	}
	assertNotForwarded(t, reqs, tok)

	t.Run("jose", func(t *testing.T) {
		set := fetchJWKS(t, h.base)
		claims, err := verifyJOSE(proof, set, h.base)
		if err != nil {
			t.Fatalf("assertion does not verify against the edge's JWKS: %v", err)
		}
		if claims.Issuer() != h.hostAudience() {
			t.Errorf("iss %q, want %q", claims.Issuer(), h.hostAudience())
		}
		if claims.Subject() != w.user.did {
			t.Errorf("sub %q, want the user %s", claims.Subject(), w.user.did)
		}
		if act, _ := claims.Get("act"); act.(map[string]any)["sub"] != w.agent.did {
			t.Errorf("act %v, want sub %s", act, w.agent.did)
		}
		if life := claims.Expiration().Sub(claims.IssuedAt()); life != 60*time.Second {
			t.Errorf("lifetime %v, want 60s", life)
		}
		if scope, _ := claims.Get("scope"); scope != "greet:execute files:read" {
			t.Errorf("scope %v", scope)
		}
		if kid := assertionKid(t, proof); !strings.HasPrefix(kid, h.hostAudience()+"#") {
			t.Errorf("kid %q", kid)
		}
		if _, err := verifyJOSE(tamper(proof), set, h.base); err == nil {
			t.Error("tampered assertion verified")
		}
		if _, err := verifyJOSE(proof, set, "http://elsewhere.example.com"); err == nil {
			t.Error("assertion verified for another audience")
		}
	})

	t.Run("mcpiverify", func(t *testing.T) {
		v, err := mcpiverify.NewVerifier(
			mcpiverify.WithJWKSURL(h.base+"/.well-known/jwks.json"),
			mcpiverify.WithAudience(h.base),
			mcpiverify.WithIssuer(h.hostAudience()),
		)
		if err != nil {
			t.Fatal(err)
		}
		id, err := v.Verify(testContext(t), proof)
		if err != nil {
			t.Fatalf("mcpiverify: %v", err)
		}
		if id.AgentDID != w.agent.did || id.UserDID != w.user.did || !id.HasScopes("greet:execute", "files:read") {
			t.Errorf("identity %+v", id)
		}
		if _, err := v.Verify(testContext(t), tamper(proof)); !errors.Is(err, mcpiverify.ErrSignature) {
			t.Errorf("tampered: %v, want ErrSignature", err)
		}
	})

	t.Run("did.json", func(t *testing.T) {
		resp, err := http.Get(h.base + "/.well-known/did.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct {
			ID              string   `json:"id"`
			AssertionMethod []string `json:"assertionMethod"`
		}
		if err := jsonDecode(resp, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.ID != h.hostAudience() || !slices.Contains(doc.AssertionMethod, assertionKid(t, proof)) {
			t.Errorf("did.json %+v, want id %s listing %s", doc, h.hostAudience(), assertionKid(t, proof))
		}
	})

	t.Run("no credential", func(t *testing.T) {
		h.upstream.Reset()
		resp := h.post(testContext(t), "/mcp", spoofHeaders, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
		h.assertEdgeError(t, resp, http.StatusUnauthorized, "invalid_token")
		if reqs := h.upstream.Requests(); len(reqs) != 0 {
			t.Errorf("upstream saw %d requests", len(reqs))
		}
	})
}

// TestLevel2Level1InjectsNothing: at level 1 (the default) the upstream gets
// no identity header at all, and the edge publishes no keys.
func TestLevel2Level1InjectsNothing(t *testing.T) {
	h := newHarness(t, siteConfig{})
	w := newWorld(t, h)
	hdr := spoofHeaders.Clone()
	hdr["Authorization"] = []string{"Bearer " + w.jwt(t)}
	ctx := testContext(t)
	greet(ctx, t, h.mustConnect(ctx, "/mcp", hdr, legacyProtocol, nil))
	reqs := h.upstream.Requests()
	if len(reqs) == 0 {
		t.Fatal("upstream saw nothing")
	}
	for i, r := range reqs {
		if got := identityHeaders(r.Header); len(got) != 0 {
			t.Errorf("upstream request %d (%s) carried %v", i, r.Method, got)
		}
	}
	resp, err := http.Get(h.base + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("level 1 answered jwks.json with %d, want 401 (not published)", resp.StatusCode)
	}
}

// TestLevel2UpstreamAuto: with upstream_mcpi auto an upstream gets the
// identity headers only once it declares MCP-I support, by serving
// /.well-known/mcp-i.json or by an MCP-I-Version response header (seen
// through reverse_proxy).
func TestLevel2UpstreamAuto(t *testing.T) {
	t.Run("well-known document", func(t *testing.T) {
		var declared atomic.Bool
		rec, up := newRecordedUpstream(t, func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/.well-known/mcp-i.json" {
					if !declared.Load() {
						http.NotFound(w, r)
						return
					}
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"mcp_i":{"version":"2.0.0","endpoints":{"handshake":"/api/mcp/handshake","verify":"/api/mcp/verify"},"supportedMethods":["Ed25519"]}}`))
					return
				}
				next.ServeHTTP(w, r)
			})
		})
		e := startEdge(t, rec, up, t.TempDir(), "level 2\nupstream_mcpi auto\nupstream {upstream}\nmcpi_probe_ttl 1s")
		w := newWorld(t, e.harness)
		hdr := http.Header{"Authorization": {"Bearer " + w.jwt(t)}, "X-Agent-DID": {"did:example:mallory"}}

		if got := identityHeaders(e.send(t, hdr).Header); len(got) != 0 {
			t.Fatalf("undeclared upstream got %v", got)
		}
		declared.Store(true)
		start := time.Now()
		poll(t, 15*time.Second, "the upstream never got the identity headers after declaring MCP-I", func() bool {
			r := e.send(t, hdr)
			got := identityHeaders(r.Header)
			if len(got) != 0 && !slices.Equal(got, level2Headers) {
				t.Fatalf("identity headers %v", got)
			}
			return len(got) != 0 && r.Header.Get("X-Agent-Did") == w.agent.did
		})
		t.Logf("switched on %v after the upstream declared", time.Since(start).Round(time.Millisecond))
	})

	t.Run("MCP-I-Version header", func(t *testing.T) {
		rec, up := newRecordedUpstream(t, func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("MCP-I-Version", "2.0.0")
				if r.URL.Path == "/.well-known/mcp-i.json" {
					// Not on the probe's path: the edge must learn it
					// from the MCP traffic.
					w.Header().Del("MCP-I-Version")
					http.NotFound(w, r)
					return
				}
				next.ServeHTTP(w, r)
			})
		})
		e := startEdge(t, rec, up, t.TempDir(), "level 2\nupstream_mcpi auto\nupstream {upstream}")
		w := newWorld(t, e.harness)
		hdr := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
		// The first response teaches the edge; the request itself went out
		// as Level 1 (the probe said no).
		if got := identityHeaders(e.send(t, hdr).Header); len(got) != 0 {
			t.Fatalf("first request got %v before anything was declared", got)
		}
		poll(t, 10*time.Second, "MCP-I-Version was not learned", func() bool {
			return slices.Equal(identityHeaders(e.send(t, hdr).Header), level2Headers)
		})
	})
}

// TestLevel2SharedStorage: two Caddy instances sharing one storage folder
// (two replicas) sign with the same generated key, so one JWKS verifies
// what either signed.
func TestLevel2SharedStorage(t *testing.T) {
	storage := t.TempDir()
	rec, up := newRecordedUpstream(t, nil)
	cfg := "level 2\nedge_did did:web:edge.test"
	a := startEdge(t, rec, up, storage, cfg)
	b := startEdge(t, rec, up, storage, cfg)
	w := newWorld(t, a.harness)
	tok := w.jwt(t, func(tm *vc.Template) { tm.Audience = []string{a.hostAudience(), b.hostAudience()} })
	hdr := http.Header{"Authorization": {"Bearer " + tok}}

	fromA := a.send(t, hdr).Header.Get("X-Verified-Delegation")
	fromB := b.send(t, hdr).Header.Get("X-Verified-Delegation")
	if assertionKid(t, fromA) != assertionKid(t, fromB) {
		t.Errorf("replicas sign with different keys: %s, %s", assertionKid(t, fromA), assertionKid(t, fromB))
	}
	set := a.jwks(t)
	if set.Len() != 1 {
		t.Errorf("JWKS of a fresh key set has %v", jwksKids(set))
	}
	for name, c := range map[string]struct{ tok, aud string }{"a": {fromA, a.base}, "b": {fromB, b.base}} {
		claims, err := verifyJOSE(c.tok, set, c.aud)
		if err != nil {
			t.Errorf("assertion from %s does not verify against a's JWKS: %v", name, err)
			continue
		}
		if claims.Issuer() != "did:web:edge.test" {
			t.Errorf("assertion from %s: iss %q", name, claims.Issuer())
		}
	}
}

// TestLevel2RotateKey: `caddy mcpi rotate-key` on the shared storage. The
// running instances switch to the new key within key_reload_interval; an
// assertion signed before the rotation still verifies against the new JWKS
// until it expires, and its key leaves the JWKS once the overlap
// (key_retention) is over, never before the assertion expired.
func TestLevel2RotateKey(t *testing.T) {
	storage := t.TempDir()
	rec, up := newRecordedUpstream(t, nil)
	cfg := "level 2\nedge_did did:web:edge.test\nassertion_ttl 10s\nkey_reload_interval 1s\nkey_retention 12s\nkey_publish_delay 1s"
	a := startEdge(t, rec, up, storage, cfg)
	b := startEdge(t, rec, up, storage, cfg)
	w := newWorld(t, a.harness)
	tok := w.jwt(t, func(tm *vc.Template) { tm.Audience = []string{a.hostAudience(), b.hostAudience()} })
	hdr := http.Header{"Authorization": {"Bearer " + tok}}

	before := a.send(t, hdr).Header.Get("X-Verified-Delegation")
	oldKid := assertionKid(t, before)
	claims, err := verifyJOSE(before, a.jwks(t), a.base)
	if err != nil {
		t.Fatal(err)
	}
	expires := claims.Expiration()

	out := a.rotateKey(t)
	t.Logf("rotate-key: %s", out)
	rotatedAt := time.Now()

	// b reloads on its own (no JWKS request reaches it meanwhile).
	var after string
	poll(t, 5*time.Second, "b kept signing with the rotated-out key", func() bool {
		after = b.send(t, hdr).Header.Get("X-Verified-Delegation")
		return assertionKid(t, after) != oldKid
	})
	newKid := assertionKid(t, after)

	// a publishes both keys within its reload interval (a JWKS request
	// makes it look at once, unless it looked less than a second ago).
	var set jwk.Set
	poll(t, 5*time.Second, "a's JWKS never listed both the old and the new key", func() bool {
		set = a.jwks(t)
		kids := jwksKids(set)
		return len(kids) == 2 && slices.Contains(kids, oldKid) && slices.Contains(kids, newKid)
	})
	if time.Now().After(expires) {
		t.Fatalf("the pre-rotation assertion expired before the check could run (machine too slow)")
	}
	if _, err := verifyJOSE(before, set, a.base); err != nil {
		t.Errorf("pre-rotation assertion no longer verifies with the new JWKS: %v", err)
	}
	if _, err := verifyJOSE(after, set, b.base); err != nil {
		t.Errorf("post-rotation assertion does not verify: %v", err)
	}
	v, err := mcpiverify.NewVerifier(mcpiverify.WithJWKSURL(b.base+"/.well-known/jwks.json"), mcpiverify.WithAudience(a.base))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(testContext(t), before); err != nil {
		t.Errorf("mcpiverify rejects the pre-rotation assertion: %v", err)
	}

	// After the overlap the old key is gone, and not before its last
	// assertion expired.
	poll(t, 30*time.Second, "the rotated-out key never left the JWKS", func() bool {
		return !slices.Contains(jwksKids(a.jwks(t)), oldKid)
	})
	if gone := time.Now(); gone.Before(expires) {
		t.Errorf("old key left the JWKS at %v, before its assertion expired at %v", gone, expires)
	}
	t.Logf("old key published for %v after rotation", time.Since(rotatedAt).Round(100*time.Millisecond))
	final := b.jwks(t)
	if kids := jwksKids(final); len(kids) != 1 || kids[0] != newKid {
		t.Errorf("final JWKS %v, want only %s", kids, newKid)
	}
	if _, err := verifyJOSE(before, final, a.base); err == nil {
		t.Error("pre-rotation assertion still verifies after its key left")
	}
}
