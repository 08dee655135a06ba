package ldproof_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/ldproof"
)

// independentFixture is a DelegationCredential with an Ed25519Signature2020
// proof signed by Digital Bazaar's JavaScript libraries (@digitalbazaar/vc
// over jsonld-signatures, jsonld.js and rdf-canonize): see
// testdata/independent/make-fixture.mjs and its README.
const independentFixture = "testdata/independent/fixture.json"

const (
	independentIssuer = "did:key:z6MkmCNKhnMJ2WNr4XdQUZTvFPqtvrGWSAiPJPLZD1qKzXZa"
	independentAgent  = "did:key:z6Mkr7EimTe8euZxqe19W8eDRxJWuMUeLQDZVAU7ycrRHgEB"
)

// failNetwork makes any use of http.DefaultTransport fail the test: the
// did:key issuer and the contexts must need no fetch.
func failNetwork(t *testing.T) {
	t.Helper()
	orig := http.DefaultTransport
	http.DefaultTransport = rtFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("network access to %s", r.URL)
		return nil, errors.New("no network in tests")
	})
	t.Cleanup(func() { http.DefaultTransport = orig })
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func readIndependent(t *testing.T) (raw []byte, issuer, vm string) {
	t.Helper()
	raw, err := os.ReadFile(independentFixture)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Issuer string `json:"issuer"`
		Proof  struct {
			Type               string `json:"type"`
			VerificationMethod string `json:"verificationMethod"`
		} `json:"proof"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if c.Proof.Type != ldproof.TypeEd25519Signature2020 || c.Issuer != independentIssuer ||
		!strings.HasPrefix(c.Proof.VerificationMethod, c.Issuer+"#") {
		t.Fatalf("fixture: issuer %q, proof %+v", c.Issuer, c.Proof)
	}
	return raw, c.Issuer, c.Proof.VerificationMethod
}

// tamper changes credentialSubject.delegation.scopes in a copy of raw.
func tamper(t *testing.T, raw []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	d := m["credentialSubject"].(map[string]any)["delegation"].(map[string]any)
	d["scopes"] = []any{"greeting:read", "greeting:admin"}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIndependentEd25519Signature2020 verifies a credential signed by
// another implementation: its verify data was built by jsonld-signatures
// over rdf-canonize, not by aries over json-gold as in the other tests.
func TestIndependentEd25519Signature2020(t *testing.T) {
	failNetwork(t)
	ctx := context.Background()
	raw, _, vm := readIndependent(t)

	key, err := didresolver.ResolveKey(ctx, didresolver.New(), vm, didresolver.AssertionMethod)
	if err != nil {
		t.Fatalf("ResolveKey(%s): %v", vm, err)
	}
	v, err := ldproof.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(ctx, raw, key); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if err := v.Verify(ctx, tamper(t, raw), key); !errors.Is(err, ldproof.ErrSignature) {
		t.Errorf("changed credentialSubject: err = %v, want ErrSignature", err)
	}
}

// TestIndependentDelegation verifies the same credential as a delegation,
// end to end through vc.Verifier.
func TestIndependentDelegation(t *testing.T) {
	failNetwork(t)
	ctx := context.Background()
	raw, issuer, _ := readIndependent(t)

	ld, err := ldproof.New()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	verifier := vc.NewVerifier(didresolver.New(),
		vc.WithLinkedDataVerifier(ld),
		vc.WithTrustedIssuers(issuer),
		vc.WithClock(func() time.Time { return now }))

	d, err := verifier.Verify(ctx, raw, vc.ForAudience("did:web:mcp.example.com"), vc.RequireScopes("greeting:read"))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if d.Issuer != issuer || d.AgentDID != independentAgent ||
		strings.Join(d.Scopes, " ") != "greeting:read greeting:write" ||
		d.ID != "urn:uuid:6a1d0000-0000-4000-8000-000000000001" ||
		d.DelegationID != "urn:uuid:6a1d0000-0000-4000-8000-000000000002" ||
		!d.IssuedAt.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) ||
		!d.ExpiresAt.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("delegation = %+v", d)
	}

	if _, err := verifier.Verify(ctx, tamper(t, raw), vc.ForAudience("did:web:mcp.example.com")); !errors.Is(err, vc.ErrSignature) {
		t.Errorf("changed credentialSubject: err = %v, want vc.ErrSignature", err)
	}

	other := vc.NewVerifier(didresolver.New(),
		vc.WithLinkedDataVerifier(ld),
		vc.WithTrustedIssuers("did:web:issuer.example.com"),
		vc.WithClock(func() time.Time { return now }))
	if _, err := other.Verify(ctx, raw, vc.ForAudience("did:web:mcp.example.com")); !errors.Is(err, vc.ErrUntrustedIssuer) {
		t.Errorf("other trusted issuer: err = %v, want vc.ErrUntrustedIssuer", err)
	}
}
