package identity

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

const testHost = "mcp.example.com"

// newIdent builds an Identity for c, closed when the test ends.
func newIdent(t testing.TB, c Config, opts ...Option) *Identity {
	t.Helper()
	id, err := New(context.Background(), c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = id.Close() })
	return id
}

// testDelegation is a verified delegation, as edge hands it to Inject.
func testDelegation() *vc.Delegation {
	return &vc.Delegation{
		AgentDID:     "did:web:agent.example.com",
		UserDID:      "did:web:user.example.com",
		Issuer:       "did:web:user.example.com",
		Scopes:       []string{"tools:read"},
		ExpiresAt:    time.Now().Add(time.Hour),
		ID:           "urn:uuid:delegation-1",
		DelegationID: "urn:uuid:delegation-1",
		Hash:         [32]byte{1, 2, 3},
	}
}

// fileStorage is a storage shared through a temporary directory
// (certmagic's file storage, which Caddy's file_system storage is).
func fileStorage(t testing.TB) assertion.Storage {
	return &certmagic.FileStorage{Path: t.TempDir()}
}

// jwksOf fetches the JWKS the way a verifier does.
func jwksOf(t testing.TB, id *Identity) jwk.Set {
	t.Helper()
	body, handled, err := id.WellKnown(httptest.NewRequest(http.MethodGet, "http://"+testHost+JWKSPath, nil))
	if !handled || err != nil {
		t.Fatalf("GET %s: handled %t, %v", JWKSPath, handled, err)
	}
	set, err := jwk.Parse(body)
	if err != nil {
		t.Fatalf("JWKS %s: %v", body, err)
	}
	return set
}

// verifyAssertion checks an X-Verified-Delegation with jwx against set.
func verifyAssertion(t testing.TB, tok string, set jwk.Set, aud string) jwt.Token {
	t.Helper()
	parsed, err := jwt.Parse([]byte(tok), jwt.WithKeySet(set), jwt.WithValidate(true), jwt.WithAudience(aud))
	if err != nil {
		t.Fatalf("assertion does not verify against the JWKS: %v", err)
	}
	return parsed
}

func kidOf(t testing.TB, tok string) string {
	t.Helper()
	msg, err := jws.Parse([]byte(tok))
	if err != nil {
		t.Fatal(err)
	}
	return msg.Signatures()[0].ProtectedHeaders().KeyID()
}

func TestEdgeKeyStorageFileSystem(t *testing.T) {
	ctx := context.Background()
	st := fileStorage(t)
	if _, err := st.Load(ctx, "mcpi/none.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing key: %v", err)
	}
	gen := func() (crypto.PrivateKey, error) { return GenerateKey(AlgEdDSA) }
	ks, err := assertion.LoadOrCreateWithRetention(ctx, st, DefaultKeyStorageKey, 90*time.Second, gen)
	if err != nil {
		t.Fatal(err)
	}
	if ks.Retention() != 90*time.Second {
		t.Errorf("retention %v", ks.Retention())
	}
	again, err := assertion.LoadOrCreateWithRetention(ctx, st, DefaultKeyStorageKey, 30*time.Second, gen)
	if err != nil || again.Current().Thumbprint != ks.Current().Thumbprint || again.Retention() != 90*time.Second {
		t.Fatalf("second load: %v; retention %v (never lowered)", err, again.Retention())
	}
	raised, err := assertion.LoadOrCreateWithRetention(ctx, st, DefaultKeyStorageKey, 2500*time.Millisecond+120*time.Second, gen)
	if err != nil || raised.Current().Thumbprint != ks.Current().Thumbprint || raised.Retention() != 123*time.Second {
		t.Fatalf("raise: %v; retention %v", err, raised.Retention())
	}
	data, err := st.Load(ctx, DefaultKeyStorageKey)
	if err != nil || !strings.Contains(string(data), `"retention_seconds":123`) {
		t.Fatalf("stored set: %v %s", err, data)
	}

	// Two instances on one storage (two replicas) sign with the same key.
	id1 := newIdent(t, Config{}, WithStorage(st))
	id2 := newIdent(t, Config{}, WithStorage(st))
	k1, k2 := id1.ks.Load().Current(), id2.ks.Load().Current()
	if k1.Thumbprint != ks.Current().Thumbprint || k2.Thumbprint != k1.Thumbprint {
		t.Fatalf("replicas use keys %s and %s, stored %s", k1.Thumbprint, k2.Thumbprint, ks.Current().Thumbprint)
	}
	d := testDelegation()
	sign := func(id *Identity) string {
		r := httptest.NewRequest(http.MethodGet, "http://"+testHost+"/mcp", nil)
		if err := id.Inject(r, d); err != nil {
			t.Fatal(err)
		}
		return r.Header.Get(HeaderVerifiedDelegation)
	}
	before := sign(id2)
	verifyAssertion(t, before, jwksOf(t, id1), "http://"+testHost)

	// Rotation in the storage (what `caddy mcpi rotate-key` does) reaches a
	// running instance on reload; the old key stays published.
	rotated, err := assertion.RotateStored(ctx, st, DefaultKeyStorageKey, time.Now(), gen)
	if err != nil {
		t.Fatal(err)
	}
	if err := id1.reload(ctx); err != nil {
		t.Fatal(err)
	}
	after := sign(id1)
	set := jwksOf(t, id1)
	if set.Len() != 2 {
		t.Fatalf("JWKS after rotation has %d keys", set.Len())
	}
	verifyAssertion(t, before, set, "http://"+testHost)
	verifyAssertion(t, after, set, "http://"+testHost)
	if kidOf(t, after) == kidOf(t, before) || !strings.HasSuffix(kidOf(t, after), rotated.Current().Thumbprint) {
		t.Errorf("kids before %s after %s", kidOf(t, before), kidOf(t, after))
	}
	// id2 has not reloaded yet, but a JWKS request makes it look.
	id2.reloadMu.Lock()
	id2.lastLoad = time.Time{}
	id2.reloadMu.Unlock()
	if jwksOf(t, id2).Len() != 2 {
		t.Error("JWKS request did not reload the rotated set")
	}

	// A stored set that cannot be decoded is never replaced.
	if err := st.Store(ctx, "mcpi/bad.json", []byte("{")); err != nil {
		t.Fatal(err)
	}
	_, err = New(ctx, Config{KeyStorageKey: "mcpi/bad.json"}, WithStorage(st))
	if err == nil || !strings.Contains(err.Error(), "invalid key set") {
		t.Errorf("New with a corrupt key set: %v", err)
	}
}

// namesFor builds the edge's names for a Host once, as edgeDID and the
// audiences are derived, and keeps a bounded number of them.
func TestNamesFor(t *testing.T) {
	rt := &Identity{}
	n, err := rt.namesFor("MCP.Example.com:8443")
	if err != nil {
		t.Fatal(err)
	}
	want := hostNames{did: "did:web:mcp.example.com%3A8443", host: "mcp.example.com:8443",
		aud: [2]string{"http://mcp.example.com:8443", "https://mcp.example.com:8443"}}
	if *n != want {
		t.Errorf("namesFor = %+v, want %+v", *n, want)
	}
	if again, _ := rt.namesFor("MCP.Example.com:8443"); again != n {
		t.Error("names built again for the same Host")
	}
	if _, err := rt.namesFor("a/b"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("unusable Host: %v", err)
	}
	for i := range 3 * maxCachedHosts {
		if _, err := rt.namesFor(fmt.Sprintf("h%d.example.com", i)); err != nil {
			t.Fatal(err)
		}
		if len(rt.names) > maxCachedHosts {
			t.Fatalf("%d hosts kept", len(rt.names))
		}
	}
	fixed := &Identity{fixedDID: "did:web:edge.example.com"}
	if n, _ := fixed.namesFor("other.example.com"); n.did != "did:web:edge.example.com" {
		t.Errorf("configured edge DID: %q", n.did)
	}
}

// StripInjected removes every spelling of the headers Inject sets,
// Unicode ones that lower-case to them included, and nothing else.
func TestStripInjected(t *testing.T) {
	gone := []string{"X-Agent-Did", "x_user_did", "X.Agent.Reputation.Score", "X-Verified-Delegation",
		"Kya-Os-Agent-Did", "KYA_OS_DELEGATION_PROOF", "X-Agent-D\u0130d"}
	kept := []string{"X-Agent-Didx", "X-Request-Id", "Kya-Os-Delegation-Credential", "Authorization", "X-User"}
	h := http.Header{}
	for _, k := range append(append([]string{}, gone...), kept...) {
		h[k] = []string{"v"}
	}
	StripInjected(h)
	for _, k := range gone {
		if _, ok := h[k]; ok {
			t.Errorf("%q not stripped", k)
		}
	}
	for _, k := range kept {
		if _, ok := h[k]; !ok {
			t.Errorf("%q stripped", k)
		}
	}
}

func TestInjectHashForm(t *testing.T) {
	id := newIdent(t, Config{AssertionForm: FormHash})
	d := testDelegation()
	r := httptest.NewRequest(http.MethodGet, "http://"+testHost+"/mcp", nil)
	if err := id.Inject(r, d); err != nil {
		t.Fatal(err)
	}
	if got := r.Header.Get(HeaderVerifiedDelegation); got != d.HashRef() || !strings.HasPrefix(got, "sha256:") || len(got) != 71 {
		t.Errorf("X-Verified-Delegation = %q, want %q", got, d.HashRef())
	}
	if r.Header.Get(HeaderAgentDID) != d.AgentDID || r.Header.Get(HeaderUserDID) != d.UserDID {
		t.Errorf("DIDs: %v", r.Header)
	}
}

func TestInjectKYAOS(t *testing.T) {
	for _, profile := range []string{ProfileKYAOS, ProfileBoth} {
		id := newIdent(t, Config{HeaderProfile: profile, Upstream: "http://API.example.com:9000"})
		d := testDelegation()
		r := httptest.NewRequest(http.MethodGet, "http://"+testHost+"/mcp", nil)
		if err := id.Inject(r, d); err != nil {
			t.Fatal(err)
		}
		if r.Header.Get("KYA-OS-Agent-DID") != d.AgentDID {
			t.Errorf("%s: KYA-OS-Agent-DID = %q", profile, r.Header.Get("KYA-OS-Agent-DID"))
		}
		proof := r.Header.Get("KYA-OS-Delegation-Proof")
		msg, err := jws.Parse([]byte(proof))
		if err != nil {
			t.Fatalf("%s: %v", profile, err)
		}
		if typ := msg.Signatures()[0].ProtectedHeaders().Type(); typ != "JWT" {
			t.Errorf("%s: typ %q", profile, typ)
		}
		claims, err := jwt.Parse([]byte(proof), jwt.WithKeySet(jwksOf(t, id)), jwt.WithValidate(true), jwt.WithAudience("api.example.com:9000"))
		if err != nil {
			t.Fatalf("%s: %v", profile, err)
		}
		if claims.Subject() != d.UserDID || claims.Expiration().Sub(claims.IssuedAt()) != assertion.KYAOSProofLifetime {
			t.Errorf("%s: sub %q life %v", profile, claims.Subject(), claims.Expiration().Sub(claims.IssuedAt()))
		}
		if scope, _ := claims.Get("scope"); scope != "tools:read" {
			t.Errorf("%s: scope %v", profile, scope)
		}
		if chain, _ := claims.Get("delegation_chain"); !reflect.DeepEqual(chain, []any{d.DelegationID}) {
			t.Errorf("%s: delegation_chain %v", profile, chain)
		}
		hasMCPI := r.Header.Get(HeaderVerifiedDelegation) != ""
		if hasMCPI != (profile == ProfileBoth) {
			t.Errorf("%s: X-Verified-Delegation present = %t", profile, hasMCPI)
		}
		if profile == ProfileBoth {
			// The configured upstream is the aud of the MCP-I assertion.
			verifyAssertion(t, r.Header.Get(HeaderVerifiedDelegation), jwksOf(t, id), "http://api.example.com:9000")
		}
	}
}

// TestInjectValuesNotShared: what a later handler does to one request's
// identity headers reaches neither another request nor a later one. Caddy's
// request_header replace writes header values in place (hdr[k][i] = …) and
// Header.Add appends, so the values Inject sets must belong to their request
// alone (a per-credential slice shared between requests would leak such an
// edit), and each header's slice must be capped so that an Add to one does
// not write over the next.
func TestInjectValuesNotShared(t *testing.T) {
	id := newIdent(t, Config{}) // JWS form, assertion reused while fresh
	d := testDelegation()
	inject := func() *http.Request {
		r := httptest.NewRequest(http.MethodGet, "http://"+testHost+"/mcp", nil)
		if err := id.Inject(r, d); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r1, r2 := inject(), inject()
	proof := r2.Header.Get(HeaderVerifiedDelegation)
	if proof == "" || r1.Header.Get(HeaderVerifiedDelegation) != proof {
		t.Fatalf("assertion not reused: %q, %q", r1.Header.Get(HeaderVerifiedDelegation), proof)
	}
	want := http.Header{
		HeaderAgentDID:           {d.AgentDID},
		HeaderUserDID:            {d.UserDID},
		HeaderVerifiedDelegation: {proof},
	}

	// A later handler on r1: Add to each header, then replace every value in
	// place, the way Caddy's headers handler does.
	r1.Header.Add(HeaderAgentDID, "added-agent")
	r1.Header.Add(HeaderUserDID, "added-user")
	if got := r1.Header.Values(HeaderUserDID); !reflect.DeepEqual(got, []string{d.UserDID, "added-user"}) {
		t.Errorf("X-User-DID after two Adds = %q: an Add wrote over another header", got)
	}
	if got := r1.Header.Values(HeaderVerifiedDelegation); !reflect.DeepEqual(got, []string{proof}) {
		t.Errorf("X-Verified-Delegation after Adds to the others = %q", got)
	}
	for _, vals := range r1.Header {
		for i := range vals {
			vals[i] = "tampered"
		}
	}

	r3 := inject()
	for name, r := range map[string]*http.Request{"another request": r2, "a later request": r3} {
		for k, v := range want {
			if got := r.Header.Values(k); !reflect.DeepEqual(got, v) {
				t.Errorf("%s: %s = %q, want %q", name, k, got, v)
			}
		}
	}
}
