package edge_test

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

const (
	boundHost = "mcp.example.com"
	boundURL  = "http://" + boundHost + "/mcp"
	listBody  = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
)

// boundParties: a user, and an agent whose DID is the did:jwk of its DPoP
// key, as the authorization server issues them.
type boundParties struct {
	userPriv      crypto.PrivateKey
	userDID, kid  string
	agentKey      ed25519.PrivateKey
	agentDID, jkt string
}

func newBoundParties(t testing.TB) boundParties {
	t.Helper()
	userPriv, err := didresolver.GenerateKey(didresolver.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := didresolver.PublicKeyOf(userPriv)
	userDID, kid, err := didresolver.KeyDID(pub)
	if err != nil {
		t.Fatal(err)
	}
	_, agentKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	agentDID, err := didresolver.JWKDID(agentKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	k, err := jwk.FromRaw(agentKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	jkt, err := dpop.Thumbprint(k)
	if err != nil {
		t.Fatal(err)
	}
	return boundParties{userPriv, userDID, kid, agentKey, agentDID, jkt}
}

// credential issues a delegation to the agent, bound to its key when
// jkt is set.
func (p boundParties) credential(t testing.TB, jkt string) string {
	t.Helper()
	s, err := vc.IssueJWT(p.userPriv, p.kid, vc.Template{
		AgentDID: p.agentDID, UserDID: p.userDID, Audience: []string{"https://" + boundHost},
		Scopes: []string{"tools:read"}, ExpiresAt: time.Now().Add(time.Hour), CnfJKT: jkt,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (p boundParties) proof(t testing.TB, key ed25519.PrivateKey, method, url, token string, iat time.Time) string {
	t.Helper()
	s, err := dpop.NewProof(key, method, url, token, iat)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// boundEdge is a route trusting the user, on store (a replica's view of the
// shared nonce store).
func boundEdge(t testing.TB, p boundParties, store challenge.NonceStore) *edge.Handler {
	t.Helper()
	h, err := edge.New(edge.Config{TrustedIssuers: []string{p.userDID}}, edge.WithNonceStore(store, "memory"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

type boundResult struct {
	rec      *httptest.ResponseRecorder
	upstream *http.Request // nil: the request never reached the upstream
}

func send(t testing.TB, h *edge.Handler, auth string, proofs ...string) boundResult {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, boundURL, strings.NewReader(listBody))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	for _, p := range proofs {
		r.Header.Add("DPoP", p)
	}
	res := boundResult{rec: httptest.NewRecorder()}
	err := h.ServeNext(res.rec, r, func(w http.ResponseWriter, r *http.Request) error {
		res.upstream = r
		w.WriteHeader(http.StatusOK)
		return nil
	})
	if err != nil {
		t.Fatalf("ServeNext: %v", err)
	}
	return res
}

func newStore(t testing.TB) *challenge.MemoryStore {
	s := challenge.NewMemoryStore(context.Background())
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestBoundCredentialAdmittedWithProof(t *testing.T) {
	p := newBoundParties(t)
	h := boundEdge(t, p, newStore(t))
	cred := p.credential(t, p.jkt)
	// Twice: the second verification is the cache's, which must still
	// know the binding.
	for i := range 2 {
		res := send(t, h, "DPoP "+cred, p.proof(t, p.agentKey, http.MethodPost, boundURL, cred, time.Now()))
		if res.upstream == nil {
			t.Fatalf("request %d refused: %d %s", i, res.rec.Code, res.rec.Body)
		}
		if a, d := res.upstream.Header.Get("Authorization"), res.upstream.Header.Get("DPoP"); a != "" || d != "" {
			t.Fatalf("upstream got Authorization %q DPoP %q", a, d)
		}
		if res := send(t, h, "Bearer "+cred); res.upstream != nil || !strings.Contains(res.rec.Body.String(), "dpop_missing") {
			t.Fatalf("after request %d, the bound credential passed as a bearer: %d %s", i, res.rec.Code, res.rec.Body)
		}
	}
	// An unbound credential is still a bearer.
	if res := send(t, h, "Bearer "+p.credential(t, "")); res.upstream == nil {
		t.Fatalf("unbound bearer refused: %d %s", res.rec.Code, res.rec.Body)
	}
}

func TestBoundCredentialRefusals(t *testing.T) {
	p := newBoundParties(t)
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	cred := p.credential(t, p.jkt)
	unbound := p.credential(t, "")
	now := time.Now()
	cases := []struct {
		name   string
		auth   string
		proofs []string
		reason string
	}{
		{"bound credential as a bare bearer", "Bearer " + cred, nil, "dpop_missing"},
		{"bound credential as a bearer with a valid proof", "Bearer " + cred, []string{p.proof(t, p.agentKey, "POST", boundURL, cred, now)}, "dpop_missing"},
		{"proof missing", "DPoP " + cred, nil, "dpop_missing"},
		{"two proofs", "DPoP " + cred, []string{p.proof(t, p.agentKey, "POST", boundURL, cred, now), p.proof(t, p.agentKey, "POST", boundURL, cred, now)}, "dpop_invalid"},
		{"proof for another htu", "DPoP " + cred, []string{p.proof(t, p.agentKey, "POST", "http://"+boundHost+"/other", cred, now)}, "dpop_invalid"},
		{"proof for another host", "DPoP " + cred, []string{p.proof(t, p.agentKey, "POST", "http://evil.example/mcp", cred, now)}, "dpop_invalid"},
		{"proof for another htm", "DPoP " + cred, []string{p.proof(t, p.agentKey, "GET", boundURL, cred, now)}, "dpop_invalid"},
		{"proof too old", "DPoP " + cred, []string{p.proof(t, p.agentKey, "POST", boundURL, cred, now.Add(-2*time.Minute))}, "dpop_invalid"},
		{"proof from the future", "DPoP " + cred, []string{p.proof(t, p.agentKey, "POST", boundURL, cred, now.Add(time.Minute))}, "dpop_invalid"},
		{"ath of another token", "DPoP " + cred, []string{p.proof(t, p.agentKey, "POST", boundURL, unbound, now)}, "dpop_invalid"},
		{"proof without ath", "DPoP " + cred, []string{p.proof(t, p.agentKey, "POST", boundURL, "", now)}, "dpop_invalid"},
		{"proof by a key other than cnf.jkt", "DPoP " + cred, []string{p.proof(t, otherKey, "POST", boundURL, cred, now)}, "dpop_invalid"},
		{"proof garbage", "DPoP " + cred, []string{"a.b.c"}, "dpop_invalid"},
		{"unbound credential with the DPoP scheme", "DPoP " + unbound, []string{p.proof(t, p.agentKey, "POST", boundURL, unbound, now)}, "dpop_not_bound"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := boundEdge(t, p, newStore(t))
			res := send(t, h, tc.auth, tc.proofs...)
			if res.upstream != nil || res.rec.Code != http.StatusUnauthorized {
				t.Fatalf("status %d, reached upstream %v", res.rec.Code, res.upstream != nil)
			}
			var body struct{ Error, Reason string }
			if err := json.Unmarshal(res.rec.Body.Bytes(), &body); err != nil || body.Reason != tc.reason {
				t.Fatalf("body %s, want reason %s", res.rec.Body, tc.reason)
			}
			ch := res.rec.Header().Values("WWW-Authenticate")
			if len(ch) != 2 || !strings.HasPrefix(ch[0], "Bearer ") || !strings.Contains(ch[0], "resource_metadata=") ||
				!strings.HasPrefix(ch[1], "DPoP error=") || !strings.Contains(ch[1], `algs="EdDSA ES256"`) {
				t.Fatalf("WWW-Authenticate %q", ch)
			}
		})
	}
}

// TestBoundCredentialInAnotherCarrier: only Authorization carries the DPoP
// scheme, so a bound credential elsewhere is a bearer, refused.
func TestBoundCredentialInAnotherCarrier(t *testing.T) {
	p := newBoundParties(t)
	h := boundEdge(t, p, newStore(t))
	cred := p.credential(t, p.jkt)
	r := httptest.NewRequest(http.MethodPost, boundURL, strings.NewReader(listBody))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("KYA-Delegation", cred)
	r.Header.Set("DPoP", p.proof(t, p.agentKey, "POST", boundURL, cred, time.Now()))
	rec := httptest.NewRecorder()
	called := false
	_ = h.ServeNext(rec, r, func(http.ResponseWriter, *http.Request) error { called = true; return nil })
	if called || !strings.Contains(rec.Body.String(), "dpop_missing") {
		t.Fatalf("bound credential in KYA-Delegation: %d %s", rec.Code, rec.Body)
	}
}

// TestBoundCredentialProofReplayed: a proof is good once, on every replica
// sharing the nonce store.
func TestBoundCredentialProofReplayed(t *testing.T) {
	p := newBoundParties(t)
	store := newStore(t)
	a, b := boundEdge(t, p, store), boundEdge(t, p, store)
	cred := p.credential(t, p.jkt)
	proof := p.proof(t, p.agentKey, http.MethodPost, boundURL, cred, time.Now())
	if res := send(t, a, "DPoP "+cred, proof); res.upstream == nil {
		t.Fatalf("first use refused: %d %s", res.rec.Code, res.rec.Body)
	}
	for name, h := range map[string]*edge.Handler{"same replica": a, "second replica": b} {
		res := send(t, h, "DPoP "+cred, proof)
		if res.upstream != nil || !strings.Contains(res.rec.Body.String(), "dpop_replayed") {
			t.Fatalf("%s: replayed proof: %d %s", name, res.rec.Code, res.rec.Body)
		}
	}
}

// outageStore is a nonce store that cannot record anything.
type outageStore struct{ *challenge.MemoryStore }

func (outageStore) UseOnce(context.Context, [32]byte, time.Duration) error {
	return challenge.ErrStoreUnavailable
}

func TestBoundCredentialStoreOutageFailsClosed(t *testing.T) {
	p := newBoundParties(t)
	h := boundEdge(t, p, outageStore{newStore(t)})
	cred := p.credential(t, p.jkt)
	res := send(t, h, "DPoP "+cred, p.proof(t, p.agentKey, http.MethodPost, boundURL, cred, time.Now()))
	if res.upstream != nil || res.rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("store outage: %d %s", res.rec.Code, res.rec.Body)
	}
}
