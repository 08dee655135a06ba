package mcpiverify

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

const (
	edgeDID  = "did:web:edge.example.com"
	audience = "did:web:api.example.com"
	agentDID = "did:key:z6MkfWfPAQKRKCbfntVqUYyo8Qbfu71WRV4zRpQ22CtBRHqc"
	userDID  = "did:key:z6MkjsyStKSVg2GBBinMo3R2GCUMLWVGzUrbLVqHmZY62RXz"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func newClock(t time.Time) *clock        { return &clock{t: t} }
func (c *clock) set(t time.Time)         { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func hashOf(s string) [sha256.Size]byte  { return sha256.Sum256([]byte(s)) }
func b64(b []byte) string                { return base64.RawURLEncoding.EncodeToString(b) }
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return b
}
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
func ed25519Key(t testing.TB) crypto.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	return k
}

func p256Key(t testing.TB) crypto.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	return k
}

// edge is a fake caddy-mcpi edge: a signer and its JWKS endpoint.
type edge struct {
	clock   *clock
	signer  *assertion.Signer
	srv     *httptest.Server
	fetches atomic.Int32
	mode    atomic.Value // "", "fail", "huge"
}

func newEdge(t testing.TB, c *clock, priv crypto.PrivateKey) *edge {
	t.Helper()
	ks, err := assertion.NewKeySet(priv, c.Now())
	must(t, err)
	s, err := assertion.New(ks, edgeDID, assertion.WithClock(c.Now), assertion.WithReuse(false))
	must(t, err)
	e := &edge{clock: c, signer: s}
	e.mode.Store("")
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.fetches.Add(1)
		switch e.mode.Load() {
		case "fail":
			http.Error(w, "down", http.StatusInternalServerError)
			return
		case "huge":
			w.Write([]byte(`{"keys":[` + strings.Repeat(" ", 70<<10) + `]}`))
			return
		}
		b, err := e.signer.JWKS(e.clock.Now())
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(b)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func delegation() *vc.Delegation {
	return &vc.Delegation{
		AgentDID:     agentDID,
		UserDID:      userDID,
		Issuer:       userDID,
		Scopes:       []string{"greeting:read", "files:write"},
		DelegationID: "del-1",
		Hash:         hashOf("credential"),
	}
}

func (e *edge) sign(t testing.TB, aud string) string {
	t.Helper()
	tok, err := e.signer.Sign(delegation(), aud)
	must(t, err)
	return tok
}

func (e *edge) kid() string { return e.signer.KeySet().CurrentAt(e.clock.Now()).KeyID(edgeDID) }

func (e *edge) verifier(t testing.TB, opts ...Option) *Verifier {
	t.Helper()
	v, err := NewVerifier(append([]Option{
		WithJWKSURL(e.srv.URL),
		WithAudience(audience),
		WithIssuer(edgeDID),
		WithHTTPClient(e.srv.Client()),
		WithClock(e.clock.Now),
	}, opts...)...)
	must(t, err)
	return v
}

// mint signs arbitrary header and claims with jwx (for malformed tokens).
func mint(t testing.TB, alg jwa.SignatureAlgorithm, key any, hdr map[string]any, claims map[string]any) string {
	t.Helper()
	h := jws.NewHeaders()
	for k, v := range hdr {
		must(t, h.Set(k, v))
	}
	tok, err := jws.Sign(mustJSON(t, claims), jws.WithKey(alg, key, jws.WithProtectedHeaders(h)))
	must(t, err)
	return string(tok)
}

func baseClaims() map[string]any {
	return map[string]any{
		"iss": edgeDID, "aud": audience, "iat": t0.Unix(), "exp": t0.Unix() + 60, "jti": "j1",
		"sub": userDID, "act": map[string]any{"sub": agentDID}, "scope": "greeting:read",
		"delegation_id": "del-1", "vc_hash": "sha256:" + strings.Repeat("ab", 32),
	}
}

func with(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m))
	for a, b := range m {
		out[a] = b
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func TestMiddleware(t *testing.T) {
	c := newClock(t0)
	e := newEdge(t, c, ed25519Key(t))
	priv := e.signer.KeySet().Current().Signer
	good := e.sign(t, audience)
	hdr := map[string]any{"kid": e.kid(), "typ": Type}
	parts := strings.Split(good, ".")
	sigBytes, err := base64.RawURLEncoding.DecodeString(parts[2])
	must(t, err)
	sigBytes[5] ^= 0x04 // still valid base64url, wrong signature
	badSig := b64(sigBytes)
	pubBytes := []byte(priv.Public().(ed25519.PublicKey))
	noneTok := b64(mustJSON(t, map[string]any{"alg": "none", "kid": e.kid(), "typ": Type})) + "." + parts[1] + "."
	wantID := &Identity{
		AgentDID: agentDID, UserDID: userDID, Scopes: []string{"greeting:read", "files:write"},
		DelegationID: "del-1", VCHash: delegation().HashRef(), Issuer: edgeDID,
		IssuedAt: t0, ExpiresAt: t0.Add(60 * time.Second),
	}

	for _, tc := range []struct {
		name    string
		opts    []Option
		headers map[string][]string
		at      time.Duration // clock offset from t0
		status  int
		reason  string
	}{
		{name: "ok", headers: map[string][]string{HeaderVerifiedDelegation: {good}}, status: 200},
		{name: "ok-matching-headers", headers: map[string][]string{HeaderVerifiedDelegation: {good}, HeaderAgentDID: {agentDID}, HeaderUserDID: {userDID}}, status: 200},
		{name: "ok-within-skew", headers: map[string][]string{HeaderVerifiedDelegation: {good}}, at: 89 * time.Second, status: 200},
		{name: "missing", status: 401, reason: "missing"},
		{name: "missing-optional", opts: []Option{Optional()}, headers: map[string][]string{HeaderAgentDID: {"did:key:forged"}}, status: 200},
		{name: "invalid-optional", opts: []Option{Optional()}, headers: map[string][]string{HeaderVerifiedDelegation: {parts[0] + "." + parts[1] + "." + badSig}}, status: 401, reason: "bad_signature"},
		{name: "wrong-aud", headers: map[string][]string{HeaderVerifiedDelegation: {e.sign(t, "did:web:other.example.com")}}, status: 401, reason: "audience"},
		{name: "wrong-iss", opts: []Option{WithIssuer("did:web:other-edge.example.com")}, headers: map[string][]string{HeaderVerifiedDelegation: {good}}, status: 401, reason: "issuer"},
		{name: "expired", headers: map[string][]string{HeaderVerifiedDelegation: {good}}, at: 90 * time.Second, status: 401, reason: "expired"},
		{name: "not-yet-valid", headers: map[string][]string{HeaderVerifiedDelegation: {good}}, at: -31 * time.Second, status: 401, reason: "not_yet_valid"},
		{name: "bad-signature", headers: map[string][]string{HeaderVerifiedDelegation: {parts[0] + "." + parts[1] + "." + badSig}}, status: 401, reason: "bad_signature"},
		{name: "alg-none", headers: map[string][]string{HeaderVerifiedDelegation: {noneTok}}, status: 401, reason: "algorithm"},
		{name: "alg-hs256", headers: map[string][]string{HeaderVerifiedDelegation: {mint(t, jwa.HS256, pubBytes, hdr, baseClaims())}}, status: 401, reason: "algorithm"},
		{name: "alg-es256-not-allowed", opts: []Option{WithAllowedAlgs("ES256")}, headers: map[string][]string{HeaderVerifiedDelegation: {good}}, status: 401, reason: "algorithm"},
		{name: "wrong-typ", headers: map[string][]string{HeaderVerifiedDelegation: {mint(t, jwa.EdDSA, priv, map[string]any{"kid": e.kid(), "typ": "JWT"}, baseClaims())}}, status: 401, reason: "type"},
		{name: "typ-application-prefix", headers: map[string][]string{HeaderVerifiedDelegation: {mint(t, jwa.EdDSA, priv, map[string]any{"kid": e.kid(), "typ": "application/MCPI-delegation+JWT"}, baseClaims())}}, status: 200},
		{name: "crit", headers: map[string][]string{HeaderVerifiedDelegation: {mint(t, jwa.EdDSA, priv, with(hdr, "crit", []string{"exp"}), baseClaims())}}, status: 401, reason: "malformed"},
		{name: "no-kid", headers: map[string][]string{HeaderVerifiedDelegation: {mint(t, jwa.EdDSA, priv, map[string]any{"typ": Type}, baseClaims())}}, status: 401, reason: "malformed"},
		{name: "lifetime-too-long", headers: map[string][]string{HeaderVerifiedDelegation: {mint(t, jwa.EdDSA, priv, hdr, with(baseClaims(), "exp", t0.Unix()+301))}}, status: 401, reason: "lifetime"},
		{name: "no-act", headers: map[string][]string{HeaderVerifiedDelegation: {mint(t, jwa.EdDSA, priv, hdr, with(baseClaims(), "act", nil))}}, status: 401, reason: "malformed"},
		{name: "bad-vc-hash", headers: map[string][]string{HeaderVerifiedDelegation: {mint(t, jwa.EdDSA, priv, hdr, with(baseClaims(), "vc_hash", "md5:00"))}}, status: 401, reason: "malformed"},
		{name: "aud-array", headers: map[string][]string{HeaderVerifiedDelegation: {mint(t, jwa.EdDSA, priv, hdr, with(baseClaims(), "aud", []string{"x", audience}))}}, status: 200},
		{name: "agent-header-mismatch", headers: map[string][]string{HeaderVerifiedDelegation: {good}, HeaderAgentDID: {"did:key:zImpostor"}}, status: 401, reason: "header_mismatch"},
		{name: "user-header-mismatch", headers: map[string][]string{HeaderVerifiedDelegation: {good}, HeaderUserDID: {agentDID}}, status: 401, reason: "header_mismatch"},
		{name: "agent-header-twice", headers: map[string][]string{HeaderVerifiedDelegation: {good}, HeaderAgentDID: {agentDID, agentDID}}, status: 401, reason: "header_mismatch"},
		{name: "assertion-twice", headers: map[string][]string{HeaderVerifiedDelegation: {good, good}}, status: 401, reason: "malformed"},
		{name: "hash-reference", headers: map[string][]string{HeaderVerifiedDelegation: {assertion.HashReference(delegation())}}, status: 401, reason: "hash_reference"},
		{name: "json-serialization", headers: map[string][]string{HeaderVerifiedDelegation: {`{"payload":"` + parts[1] + `"}`}}, status: 401, reason: "malformed"},
		{name: "garbage", headers: map[string][]string{HeaderVerifiedDelegation: {"a.b.c"}}, status: 401, reason: "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.set(t0.Add(tc.at))
			v := e.verifier(t, tc.opts...)
			var got *Identity
			var sawAgentHeader string
			called := false
			h := v.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				called = true
				got, _ = FromContext(r.Context())
				sawAgentHeader = r.Header.Get(HeaderAgentDID)
			}))
			req := httptest.NewRequest(http.MethodPost, "http://api.example.com/mcp", nil)
			for k, vs := range tc.headers {
				for _, val := range vs {
					req.Header.Add(k, val)
				}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d (body %s)", rec.Code, tc.status, rec.Body)
			}
			if tc.status != 200 {
				if called {
					t.Fatal("next called on rejection")
				}
				var body map[string]string
				must(t, json.Unmarshal(rec.Body.Bytes(), &body))
				if body["reason"] != tc.reason || body["error"] != "invalid_token" || body["error_description"] == "" {
					t.Fatalf("body = %v, want reason %q", body, tc.reason)
				}
				if rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Cache-Control") != "no-store" {
					t.Fatalf("headers %v", rec.Header())
				}
				if strings.Contains(rec.Body.String(), parts[1]) {
					t.Fatal("token echoed in the response")
				}
				return
			}
			if !called {
				t.Fatal("next not called")
			}
			if _, hasAssertion := tc.headers[HeaderVerifiedDelegation]; !hasAssertion {
				if got != nil || sawAgentHeader != "" {
					t.Fatalf("optional pass-through: identity %v, X-Agent-DID %q", got, sawAgentHeader)
				}
				return
			}
			if got == nil {
				t.Fatal("no identity in context")
			}
			if tc.name == "ok" {
				cp := *got
				if cp.TokenID == "" {
					t.Error("no jti")
				}
				cp.TokenID = ""
				if !reflect.DeepEqual(&cp, wantID) {
					t.Errorf("identity = %+v\nwant %+v", cp, *wantID)
				}
				if !got.HasScopes("files:write") || got.HasScopes("admin") {
					t.Error("HasScopes wrong")
				}
			}
		})
	}
}

func TestRotatedEdgeRefetch(t *testing.T) {
	c := newClock(t0)
	e := newEdge(t, c, ed25519Key(t))
	v := e.verifier(t)
	ctx := t.Context()
	if _, err := v.Verify(ctx, e.sign(t, audience)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, e.sign(t, audience)); err != nil {
		t.Fatal(err)
	}
	if n := e.fetches.Load(); n != 1 {
		t.Fatalf("fetches = %d, want 1 (cached)", n)
	}

	// The edge rotates to a P-256 key; the new kid triggers one refetch.
	c.Advance(15 * time.Second)
	must(t, e.signer.KeySet().Rotate(c.Now(), p256Key(t)))
	id, err := v.Verify(ctx, e.sign(t, audience))
	if err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if id.AgentDID != agentDID || e.fetches.Load() != 2 {
		t.Fatalf("fetches = %d, want 2", e.fetches.Load())
	}
	// A kid nobody published: rate-limited, no further fetch.
	stranger := mint(t, jwa.EdDSA, ed25519Key(t), map[string]any{"kid": edgeDID + "#stranger", "typ": Type}, baseClaims())
	if _, err := v.Verify(ctx, stranger); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("unknown kid: err = %v", err)
	}
	if n := e.fetches.Load(); n != 2 {
		t.Fatalf("fetches = %d after unknown kid within the interval, want 2", n)
	}
	// After the interval an unknown kid may refetch again (once).
	c.Advance(DefaultRefetchInterval)
	for range 3 {
		if _, err := v.Verify(ctx, stranger); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("unknown kid: err = %v", err)
		}
	}
	if n := e.fetches.Load(); n != 3 {
		t.Fatalf("fetches = %d, want 3", n)
	}
	// TTL expiry refetches.
	c.Advance(DefaultCacheTTL)
	if _, err := v.Verify(ctx, e.sign(t, audience)); err != nil {
		t.Fatal(err)
	}
	if n := e.fetches.Load(); n != 4 {
		t.Fatalf("fetches = %d after TTL, want 4", n)
	}
}

func TestJWKSFailures(t *testing.T) {
	c := newClock(t0)
	e := newEdge(t, c, ed25519Key(t))
	tok := e.sign(t, audience)

	for _, mode := range []string{"fail", "huge"} {
		t.Run(mode, func(t *testing.T) {
			e.mode.Store(mode)
			v := e.verifier(t)
			h := v.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("next called") }))
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set(HeaderVerifiedDelegation, tok)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "jwks_unavailable") {
				t.Fatalf("status %d body %s", rec.Code, rec.Body)
			}
			// A failed fetch is not retried within the refetch interval.
			before := e.fetches.Load()
			if _, err := v.Verify(t.Context(), tok); !errors.Is(err, ErrJWKSUnavailable) {
				t.Fatalf("err = %v", err)
			}
			if e.fetches.Load() != before {
				t.Fatal("failed fetch retried immediately")
			}
		})
	}

	t.Run("stale-keys-survive-an-outage", func(t *testing.T) {
		e.mode.Store("")
		c.set(t0)
		v := e.verifier(t, WithCacheTTL(time.Minute))
		if _, err := v.Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
		e.mode.Store("fail")
		c.set(t0.Add(61 * time.Second)) // TTL passed, refetch fails, keys kept for one more TTL
		tok2 := e.sign(t, audience)
		if _, err := v.Verify(t.Context(), tok2); err != nil {
			t.Fatalf("during outage: %v", err)
		}
		c.set(t0.Add(121 * time.Second)) // beyond 2×TTL: fail closed
		tok3 := e.sign(t, audience)
		if _, err := v.Verify(t.Context(), tok3); !errors.Is(err, ErrJWKSUnavailable) {
			t.Fatalf("after 2×TTL: err = %v", err)
		}
	})

	t.Run("slow-jwks-times-out", func(t *testing.T) {
		block := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-block:
			case <-r.Context().Done():
			}
		}))
		defer slow.Close()
		defer close(block)
		v, err := NewVerifier(WithJWKSURL(slow.URL), WithAudience(audience), WithFetchTimeout(100*time.Millisecond), WithClock(c.Now))
		must(t, err)
		start := time.Now()
		if _, err := v.Verify(t.Context(), tok); !errors.Is(err, ErrJWKSUnavailable) {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("fetch took %v", d)
		}
	})
}

func TestNewVerifierOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		ok   bool
	}{
		{"ok", []Option{WithJWKSURL("https://e/jwks"), WithAudience("a")}, true},
		{"no-url", []Option{WithAudience("a")}, false},
		{"no-audience", []Option{WithJWKSURL("https://e/jwks")}, false},
		{"empty-audience", []Option{WithJWKSURL("https://e/jwks"), WithAudience("")}, false},
		{"rs256", []Option{WithJWKSURL("https://e/jwks"), WithAudience("a"), WithAllowedAlgs("RS256")}, false},
		{"no-algs", []Option{WithJWKSURL("https://e/jwks"), WithAudience("a"), WithAllowedAlgs()}, false},
		{"zero-ttl", []Option{WithJWKSURL("https://e/jwks"), WithAudience("a"), WithCacheTTL(0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewVerifier(tc.opts...)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Error("Middleware with invalid options did not panic")
		}
	}()
	Middleware(http.NotFoundHandler())
}

func TestContextHelpers(t *testing.T) {
	if id, ok := FromContext(context.Background()); ok || id != nil {
		t.Fatal("identity in empty context")
	}
	want := &Identity{AgentDID: agentDID}
	if id, ok := FromContext(NewContext(context.Background(), want)); !ok || id != want {
		t.Fatal("NewContext/FromContext round trip failed")
	}
	if Reason(errors.New("x")) != "invalid" || Reason(ErrExpired) != "expired" {
		t.Fatal("Reason mapping")
	}
}

func TestWithErrorHandler(t *testing.T) {
	c := newClock(t0)
	e := newEdge(t, c, ed25519Key(t))
	var got error
	v := e.verifier(t, WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
		got = err
		w.WriteHeader(http.StatusTeapot)
	}))
	rec := httptest.NewRecorder()
	v.Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusTeapot || !errors.Is(got, ErrMissing) {
		t.Fatalf("status %d err %v", rec.Code, got)
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, bc := range []struct {
		name string
		key  func(testing.TB) crypto.PrivateKey
	}{{"EdDSA", ed25519Key}, {"ES256", p256Key}} {
		b.Run(bc.name, func(b *testing.B) {
			c := newClock(t0)
			e := newEdge(b, c, bc.key(b))
			v := e.verifier(b)
			tok := e.sign(b, audience)
			ctx := context.Background()
			if _, err := v.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestConcurrentColdCacheFetchesOnce(t *testing.T) {
	c := newClock(t0)
	e := newEdge(t, c, ed25519Key(t))
	v := e.verifier(t)
	tok := e.sign(t, audience)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := v.Verify(t.Context(), tok); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := e.fetches.Load(); n != 1 {
		t.Fatalf("fetches = %d, want 1", n)
	}
}

// TestScheduledRotationNoFailure: an edge that publishes its next key
// before it signs (rotate-key's key_publish_delay, longer than the
// refetch interval) fails no verification, even when a flood of unknown
// kids has just used up the verifier's refetch allowance.
func TestScheduledRotationNoFailure(t *testing.T) {
	c := newClock(t0)
	e := newEdge(t, c, ed25519Key(t))
	v := e.verifier(t)
	ctx := t.Context()
	if _, err := v.Verify(ctx, e.sign(t, audience)); err != nil {
		t.Fatal(err)
	}
	stranger := mint(t, jwa.EdDSA, ed25519Key(t), map[string]any{"kid": edgeDID + "#stranger", "typ": Type}, baseClaims())
	flood := func() {
		for range 50 {
			if _, err := v.Verify(ctx, stranger); !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("unknown kid: %v", err)
			}
		}
	}
	// The flood uses the allowance right before the rotation, and goes
	// on every second; the edge's own requests never fail.
	c.Advance(DefaultRefetchInterval)
	flood()
	before := e.kid()
	delay := 2 * DefaultRefetchInterval
	must(t, e.signer.KeySet().Schedule(c.Now(), delay, p256Key(t)))
	for range 2 * delay / time.Second {
		c.Advance(time.Second)
		flood()
		if _, err := v.Verify(ctx, e.sign(t, audience)); err != nil {
			t.Fatalf("%v after the rotation: %v", c.Now().Sub(t0), err)
		}
	}
	if e.kid() == before {
		t.Fatal("the edge never switched to the scheduled key")
	}
	// At most one fetch per refetch interval, flood or not.
	if n, most := e.fetches.Load(), int32(2+2*delay/DefaultRefetchInterval); n > most {
		t.Errorf("fetches = %d, want at most %d", n, most)
	}
}
