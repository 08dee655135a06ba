package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// fileStorage is a storage shared through a temporary directory
// (certmagic's file storage, which Caddy's file_system storage is).
func fileStorage(t testing.TB) assertion.Storage {
	return &certmagic.FileStorage{Path: t.TempDir()}
}

// l2Handler provisions a Level 2 handler trusting f's user, with its key
// set in st (nil: in memory).
func (f fixture) l2Handler(t testing.TB, st assertion.Storage, mod func(*setup)) *Handler {
	t.Helper()
	return build(t, Config{Level: 2, TrustedIssuers: []string{f.user.did}}, func(c *setup) {
		if st != nil {
			c.use(WithKeyStorage(st))
		}
		if mod != nil {
			mod(c)
		}
	})
}

// jwksOf fetches the handler's JWKS through ServeHTTP.
func jwksOf(t testing.TB, h *Handler) jwk.Set {
	t.Helper()
	res := serve(t, h, newRequest(http.MethodGet, identity.JWKSPath, ""))
	if res.called || res.rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d, next called %t", identity.JWKSPath, res.rec.Code, res.called)
	}
	set, err := jwk.Parse(res.rec.Body.Bytes())
	if err != nil {
		t.Fatalf("JWKS %s: %v", res.rec.Body, err)
	}
	return set
}

// verifyAssertion checks an X-Verified-Delegation with jwx against set and
// returns its claims.
func verifyAssertion(t testing.TB, tok string, set jwk.Set, aud string) jwt.Token {
	t.Helper()
	msg, err := jws.Parse([]byte(tok))
	if err != nil {
		t.Fatal(err)
	}
	if typ := msg.Signatures()[0].ProtectedHeaders().Type(); typ != assertion.Type {
		t.Errorf("typ = %q", typ)
	}
	parsed, err := jwt.Parse([]byte(tok), jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithAudience(aud))
	if err != nil {
		t.Fatalf("assertion does not verify against the JWKS: %v", err)
	}
	return parsed
}

func TestInjectIdentityStripsThenSets(t *testing.T) {
	f := newFixture(t)
	h := f.l2Handler(t, fileStorage(t), nil)
	tok := f.jwt(t, nil)

	r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set("Authorization", "Bearer "+tok)
	// Forged identity in every spelling a client (or a sloppy upstream
	// stack) could use.
	r.Header["X-Agent-Did"] = []string{"did:key:forged"}
	r.Header["x-agent-did"] = []string{"did:key:forged"}
	r.Header["X_Agent_DID"] = []string{"did:key:forged"}
	r.Header["X-User-Did"] = []string{"did:key:forged-user"}
	r.Header["X-Verified-Delegation"] = []string{"forged"}
	r.Header["X-Agent-Reputation-Score"] = []string{"100"}
	r.Header["Kya-Os-Agent-Did"] = []string{"did:key:forged"}
	res := serve(t, h, r)
	if !res.called {
		t.Fatalf("next not called: %d %s", res.rec.Code, res.rec.Body)
	}
	got := res.fwd.Header
	for k := range got {
		n := strings.ToLower(strings.ReplaceAll(k, "_", "-"))
		if strings.HasPrefix(n, "x-") && k != identity.HeaderAgentDID && k != identity.HeaderUserDID && k != identity.HeaderVerifiedDelegation {
			t.Errorf("forwarded header %s", k)
		}
		if strings.HasPrefix(n, "kya-") {
			t.Errorf("forwarded header %s", k)
		}
	}
	if v := got.Values(identity.HeaderAgentDID); len(v) != 1 || v[0] != f.agent.did {
		t.Errorf("X-Agent-DID = %q, want the agent", v)
	}
	if v := got.Values(identity.HeaderUserDID); len(v) != 1 || v[0] != f.user.did {
		t.Errorf("X-User-DID = %q, want the user", v)
	}
	if got.Get(identity.HeaderReputation) != "" {
		t.Error("reputation header without a reputation source")
	}
	proof := got.Get(identity.HeaderVerifiedDelegation)
	aud := "http://" + testHost
	claims := verifyAssertion(t, proof, jwksOf(t, h), aud)
	if claims.Issuer() != "did:web:"+testHost || claims.Subject() != f.user.did {
		t.Errorf("iss %q sub %q", claims.Issuer(), claims.Subject())
	}
	if life := claims.Expiration().Sub(claims.IssuedAt()); life != assertion.DefaultLifetime {
		t.Errorf("lifetime %v", life)
	}
	act, _ := claims.Get("act")
	if m, _ := act.(map[string]any); m["sub"] != f.agent.did {
		t.Errorf("act = %v", act)
	}
	if scope, _ := claims.Get("scope"); scope != "tools:read echo:execute" {
		t.Errorf("scope = %v", scope)
	}
	if vh, _ := claims.Get("vc_hash"); !strings.HasPrefix(vh.(string), "sha256:") {
		t.Errorf("vc_hash = %v", vh)
	}
	if _, err := jwt.Parse([]byte(tamperJWS(proof)), jwt.WithKeySet(jwksOf(t, h))); err == nil {
		t.Error("tampered assertion verified")
	}

	// injectIdentity itself strips before setting, whatever reached it.
	d := delegationOf(t, h, tok)
	r2 := httptest.NewRequest(http.MethodGet, "http://"+testHost+"/mcp", nil)
	r2.Header["X_User_Did"] = []string{"forged"}
	r2.Header["x-verified-delegation"] = []string{"forged"}
	if err := h.injectIdentity(r2, d); err != nil {
		t.Fatal(err)
	}
	if len(r2.Header) != 3 || r2.Header.Get(identity.HeaderUserDID) != f.user.did {
		t.Errorf("headers after injectIdentity: %v", r2.Header)
	}
}

// tamperJWS flips a character in the middle of the signature.
func tamperJWS(s string) string {
	i := strings.LastIndexByte(s, '.') + (len(s)-strings.LastIndexByte(s, '.'))/2
	b := []byte(s)
	// Swap for another base64url letter: flipping a bit could turn '-' or
	// '_' into a character outside the alphabet, and the credential would be
	// rejected as malformed rather than as badly signed. Not the last
	// character either, whose low bits may be padding.
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func delegationOf(t testing.TB, h *Handler, tok string) *vc.Delegation {
	t.Helper()
	d, err := h.verifier.Verify(context.Background(), []byte(tok), vc.ForAudience("https://"+testHost))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestInjectIdentityLevel1AndOff(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	for name, h := range map[string]*Handler{
		"level 1": f.handler(t, nil),
		"off":     f.l2Handler(t, nil, func(c *setup) { c.UpstreamMCPI = UpstreamMCPIOff }),
	} {
		r := newRequest(http.MethodGet, "/mcp", "")
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("X-Agent-DID", "did:key:forged")
		res := serve(t, h, r)
		if !res.called {
			t.Fatalf("%s: next not called", name)
		}
		for k := range res.fwd.Header {
			if n := strings.ToLower(k); strings.HasPrefix(n, "x-") || strings.HasPrefix(n, "kya-") {
				t.Errorf("%s: forwarded %s", name, k)
			}
		}
		// Level 1 does not publish edge keys: the path needs a credential.
		if name == "level 1" {
			if res := serve(t, h, newRequest(http.MethodGet, identity.JWKSPath, "")); res.rec.Code != http.StatusUnauthorized {
				t.Errorf("level 1 answered %s with %d", identity.JWKSPath, res.rec.Code)
			}
		}
	}
}

// TestInjectIdentityExpired: a delegation that expired beyond the clock
// skew before the assertion could be issued is the client's fault: 401
// expired, not a 500.
func TestInjectIdentityExpired(t *testing.T) {
	f := newFixture(t)
	h := f.l2Handler(t, nil, nil)
	d := delegationOf(t, h, f.jwt(t, nil))
	d.ExpiresAt = time.Now().Add(-DefaultClockSkew - time.Second)
	err := h.injectIdentity(httptest.NewRequest(http.MethodGet, "http://"+testHost+"/", nil), d)
	if !errors.Is(err, assertion.ErrDelegationExpired) {
		t.Fatalf("err = %v", err)
	}
	rej := h.cfg.rejectionFor(err)
	if rej.status != http.StatusUnauthorized || rej.reason != "expired" {
		t.Errorf("rejection %+v", rej)
	}
	if rej := h.cfg.rejectionFor(identity.ErrUnavailable); rej.status != http.StatusInternalServerError {
		t.Errorf("edge failure rejection %+v", rej)
	}
}

func TestServeLevel2WellKnown(t *testing.T) {
	f := newFixture(t)
	h := f.l2Handler(t, nil, nil)

	set := jwksOf(t, h)
	if set.Len() != 1 {
		t.Fatalf("JWKS has %d keys", set.Len())
	}
	k, _ := set.Key(0)
	if !strings.HasPrefix(k.KeyID(), "did:web:"+testHost+"#") || k.Algorithm().String() != "EdDSA" {
		t.Errorf("kid %q alg %q", k.KeyID(), k.Algorithm())
	}
	if _, err := k.PublicKey(); err != nil {
		t.Error(err)
	}
	if _, ok := k.(jwk.OKPPrivateKey); ok {
		t.Fatal("JWKS publishes a private key")
	}

	res := serve(t, h, newRequest(http.MethodGet, "/.well-known/did.json", ""))
	var doc struct {
		ID                 string `json:"id"`
		VerificationMethod []struct {
			ID string `json:"id"`
		} `json:"verificationMethod"`
		AssertionMethod []string `json:"assertionMethod"`
	}
	if err := json.Unmarshal(res.rec.Body.Bytes(), &doc); err != nil || res.called {
		t.Fatalf("did.json: %v %s", err, res.rec.Body)
	}
	if doc.ID != "did:web:"+testHost || len(doc.VerificationMethod) != 1 || doc.VerificationMethod[0].ID != k.KeyID() || doc.AssertionMethod[0] != k.KeyID() {
		t.Errorf("did.json = %s", res.rec.Body)
	}

	// Anything else on those paths is an ordinary request.
	if res := serve(t, h, newRequest(http.MethodPost, identity.JWKSPath, "{}")); res.rec.Code != http.StatusUnauthorized {
		t.Errorf("POST %s: %d", identity.JWKSPath, res.rec.Code)
	}

	// A configured did:web with a path is served where did:web puts it.
	h2 := f.l2Handler(t, nil, func(c *setup) { c.EdgeDID = "did:web:edge.example.com:tenants:a" })
	res = serve(t, h2, newRequest(http.MethodGet, "/tenants/a/did.json", ""))
	if res.rec.Code != http.StatusOK || !strings.Contains(res.rec.Body.String(), `"id":"did:web:edge.example.com:tenants:a"`) {
		t.Errorf("did.json at path: %d %s", res.rec.Code, res.rec.Body)
	}
	if res := serve(t, h2, newRequest(http.MethodGet, "/.well-known/did.json", "")); res.rec.Code != http.StatusUnauthorized {
		t.Errorf("well-known did.json of a path DID: %d", res.rec.Code)
	}
	// A non-did:web edge DID has no did.json, but a JWKS.
	h3 := f.l2Handler(t, nil, func(c *setup) { c.EdgeDID = testKeyDID })
	if res := serve(t, h3, newRequest(http.MethodGet, "/.well-known/did.json", "")); res.rec.Code != http.StatusUnauthorized {
		t.Errorf("did.json of a did:key edge: %d", res.rec.Code)
	}
	if k, _ := jwksOf(t, h3).Key(0); !strings.HasPrefix(k.KeyID(), testKeyDID+"#") {
		t.Errorf("kid %q", k.KeyID())
	}
}

func TestSigningKeyFile(t *testing.T) {
	priv, err := didresolver.GenerateKey(didresolver.P256)
	if err != nil {
		t.Fatal(err)
	}
	jwkBytes, err := didresolver.MarshalPrivateJWK(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "edge.jwk")
	if err := os.WriteFile(path, jwkBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	h := f.l2Handler(t, nil, func(c *setup) { c.SigningKey = path })
	if k, _ := jwksOf(t, h).Key(0); k.Algorithm().String() != AlgES256 {
		t.Errorf("published alg %s", k.Algorithm())
	}
	d := delegationOf(t, h, f.jwt(t, nil))
	r := httptest.NewRequest(http.MethodGet, "http://"+testHost+"/mcp", nil)
	if err := h.injectIdentity(r, d); err != nil {
		t.Fatal(err)
	}
	verifyAssertion(t, r.Header.Get(identity.HeaderVerifiedDelegation), jwksOf(t, h), "http://"+testHost)

	if _, err := New(Config{Level: 2, TrustedIssuers: []string{"*"}, Level2Config: Level2Config{SigningKey: path, SigningAlg: AlgEdDSA}}); err == nil || !strings.Contains(err.Error(), "signing_alg") {
		t.Errorf("alg mismatch: %v", err)
	}
}

// upstreamDoc is an upstream whose /.well-known/mcp-i.json is served only
// while serveDoc is set (once hold is closed, if set).
type upstreamDoc struct {
	serveDoc atomic.Bool
	// hold, when set, delays every answer until it is closed.
	hold   chan struct{}
	probes atomic.Int32
}

func (u *upstreamDoc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/.well-known/mcp-i.json" {
		http.NotFound(w, r)
		return
	}
	u.probes.Add(1)
	if u.hold != nil {
		<-u.hold
	}
	if !u.serveDoc.Load() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"mcp_i":{"version":"2.0.0","endpoints":{"handshake":"/api/mcp/handshake"}}}`))
}

// injected reports whether one credentialed request got the Level 2
// headers, and how long the handler took.
func injected(t testing.TB, h *Handler, tok string) (bool, time.Duration) {
	t.Helper()
	r := newRequest(http.MethodGet, "/mcp", "")
	r.Header.Set("Authorization", "Bearer "+tok)
	start := time.Now()
	res := serve(t, h, r)
	took := time.Since(start)
	if !res.called {
		t.Fatalf("next not called: %d", res.rec.Code)
	}
	return res.fwd.Header.Get(identity.HeaderVerifiedDelegation) != "", took
}

// eventually polls cond every 20ms for up to 10s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestUpstreamAuto(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	doc := &upstreamDoc{}
	up := httptest.NewServer(doc)
	defer up.Close()
	h := f.l2Handler(t, nil, func(c *setup) {
		c.UpstreamMCPI = UpstreamMCPIAuto
		c.Upstream = up.URL
		c.MCPIProbeTTL = Duration(100 * time.Millisecond)
	})
	// Provisioning fired the first probe.
	eventually(t, "first probe", func() bool { return doc.probes.Load() > 0 })
	if ok, _ := injected(t, h, tok); ok {
		t.Fatal("identity headers for an upstream that declares nothing")
	}

	// The upstream starts serving the document: after the TTL a request
	// re-probes in the background (answering with the stale "no"), and
	// later requests get the headers.
	doc.serveDoc.Store(true)
	eventually(t, "upstream switched on", func() bool {
		ok, took := injected(t, h, tok)
		if took > 2*time.Second {
			t.Errorf("a request waited %v for the probe", took)
		}
		return ok
	})
	// And off again when it stops.
	doc.serveDoc.Store(false)
	eventually(t, "upstream switched off", func() bool { ok, _ := injected(t, h, tok); return !ok })
	if doc.probes.Load() < 3 {
		t.Errorf("%d probes", doc.probes.Load())
	}
}

// TestUpstreamAutoSlowProbe: the first request waits for the first probe
// at most probeWait, then goes on as "not declared".
func TestUpstreamAutoSlowProbe(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	// The document is held back until the first request is answered: a
	// request that waited for the probe would never be.
	doc := &upstreamDoc{hold: make(chan struct{})}
	doc.serveDoc.Store(true)
	up := httptest.NewServer(doc)
	defer up.Close()
	released := false
	release := func() {
		if !released {
			released = true
			close(doc.hold)
		}
	}
	defer release() // before Close, which waits for the handler
	h := f.l2Handler(t, nil, func(c *setup) {
		c.UpstreamMCPI = UpstreamMCPIAuto
		c.Upstream = up.URL
	})
	first := make(chan bool, 1)
	go func() { ok, _ := injected(t, h, tok); first <- ok }()
	select {
	case ok := <-first:
		if ok {
			t.Error("first request injected before the upstream declared anything")
		}
	case <-time.After(time.Minute):
		t.Fatal("the first request waited for the probe")
	}
	release()
	eventually(t, "probe result", func() bool { ok, _ := injected(t, h, tok); return ok })
	if n := doc.probes.Load(); n != 1 {
		t.Errorf("%d probes for one TTL", n)
	}
}

// TestUpstreamAutoHeaderLearned: an MCP-I-Version header on an upstream
// response (as reverse_proxy reports it) declares support for the requests
// that follow.
func TestUpstreamAutoHeaderLearned(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	doc := &upstreamDoc{} // never serves the document
	up := httptest.NewServer(doc)
	defer up.Close()
	h := f.l2Handler(t, nil, func(c *setup) {
		c.UpstreamMCPI = UpstreamMCPIAuto
		c.Upstream = up.URL
	})
	eventually(t, "first probe", func() bool { return doc.probes.Load() > 0 })
	if ok, _ := injected(t, h, tok); ok {
		t.Fatal("injected before anything was declared")
	}

	ctx, cancel := context.WithCancel(context.Background())
	r := newRequest(http.MethodGet, "/mcp", "").WithContext(ctx)
	r.Header.Set("Authorization", "Bearer "+tok)
	repl := newTestReplacer()
	rec := httptest.NewRecorder()
	r = prepareRequest(r, repl)
	next := Next(func(w http.ResponseWriter, r *http.Request) error {
		if r.Header.Get(identity.HeaderVerifiedDelegation) != "" {
			t.Error("injected into the request that taught it")
		}
		// What reverse_proxy does with the upstream's response headers.
		repl.Set("http.reverse_proxy.header.Mcp-I-Version", "2.0.0")
		w.Header().Set("Mcp-I-Version", "2.0.0")
		w.WriteHeader(http.StatusOK)
		return nil
	})
	if err := h.ServeNext(rec, r, next); err != nil {
		t.Fatal(err)
	}
	cancel() // the server cancels the request's context when the handler returns
	eventually(t, "header learned", func() bool { ok, _ := injected(t, h, tok); return ok })
}

// TestReputationHeader: the agent's score reaches the upstream, and a
// client's own score never does (edge/identity tests the sources).
func TestReputationHeader(t *testing.T) {
	f := newFixture(t)
	h := f.l2Handler(t, nil, func(c *setup) {
		c.Reputation = &ReputationConfig{Scores: map[string]float64{f.agent.did: 12}}
	})
	r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set("Authorization", "Bearer "+f.jwt(t, nil))
	r.Header.Set(identity.HeaderReputation, "100")
	res := serve(t, h, r)
	if !res.called {
		t.Fatalf("next not called: %d %s", res.rec.Code, res.rec.Body)
	}
	if got := res.fwd.Header.Values(identity.HeaderReputation); len(got) != 1 || got[0] != "12" {
		t.Errorf("X-Agent-Reputation-Score = %q, want [12]", got)
	}
}

// BenchmarkInjectIdentity is the per-request cost of Level 2 on a
// credential seen before: with reuse, a cache lookup; without, an Ed25519
// signature per request.
func BenchmarkInjectIdentity(b *testing.B) {
	f := newFixture(b)
	tok := f.jwt(b, nil)
	for _, reuse := range []bool{true, false} {
		name := "reuse"
		if !reuse {
			name = "sign_every_request"
		}
		b.Run(name, func(b *testing.B) {
			h := f.l2Handler(b, nil, func(c *setup) { c.AssertionReuse = &reuse })
			d := delegationOf(b, h, tok)
			r := httptest.NewRequest(http.MethodGet, "http://"+testHost+"/mcp", nil)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				clear(r.Header)
				if err := h.injectIdentity(r, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// testKeyDID is a did:key, for an edge that signs as one.
const testKeyDID = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
