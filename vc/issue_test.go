package vc

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
)

// TestIssueRoundTrip issues with every key type and both forms, and checks
// that Verify reads back exactly the template.
func TestIssueRoundTrip(t *testing.T) {
	f := newFixture(t)
	now := time.Now().Truncate(time.Second)
	tmpl := Template{
		AgentDID:  f.agent.did,
		UserDID:   "did:web:alice.example.com",
		Audience:  []string{serverDID},
		Scopes:    []string{"greeting:read", "files:write"},
		NotBefore: now.Add(-time.Minute),
		ExpiresAt: now.Add(time.Hour),
		ID:        "urn:uuid:0b6c8d4e-0000-4000-8000-000000000042",
	}
	v := NewVerifier(f.res) // IssueJWT stamps iat with the real clock
	ctx := context.Background()
	check := func(t *testing.T, raw []byte, issuer testKey, format Format) {
		t.Helper()
		d, err := v.Verify(ctx, raw, ForAudience(serverDID), RequireAudience(), RequireScopes(tmpl.Scopes...))
		if err != nil {
			t.Fatal(err)
		}
		want := &Delegation{
			AgentDID:     tmpl.AgentDID,
			UserDID:      tmpl.UserDID,
			Issuer:       issuer.did,
			Scopes:       tmpl.Scopes,
			Audience:     tmpl.Audience,
			IssuedAt:     d.IssuedAt, // the issuing clock's; bounded below
			NotBefore:    tmpl.NotBefore,
			ExpiresAt:    tmpl.ExpiresAt,
			ID:           tmpl.ID,
			DelegationID: "0b6c8d4e-0000-4000-8000-000000000042",
			Format:       format,
			Hash:         sha256.Sum256(raw),
		}
		assertDelegation(t, d, want)
		if d.IssuedAt.Before(tmpl.NotBefore) || d.IssuedAt.After(time.Now()) {
			t.Errorf("IssuedAt = %v, outside [%v, now]", d.IssuedAt, tmpl.NotBefore)
		}
	}
	for _, k := range []testKey{f.ed, f.p256, f.k1} {
		t.Run("JWT "+algOf(t, k), func(t *testing.T) {
			tok, err := IssueJWT(k.priv, k.kid, tmpl)
			if err != nil {
				t.Fatal(err)
			}
			check(t, []byte(tok), k, FormatJWTVC11)
		})
	}
	t.Run("JSON", func(t *testing.T) {
		raw, err := IssueJSON(f.ed.priv.(ed25519.PrivateKey), f.ed.kid, tmpl)
		if err != nil {
			t.Fatal(err)
		}
		check(t, raw, f.ed, FormatEd25519JCS)
	})
	t.Run("default ID", func(t *testing.T) {
		tm := tmpl
		tm.ID = ""
		tok, err := IssueJWT(f.ed.priv, f.ed.kid, tm)
		if err != nil {
			t.Fatal(err)
		}
		d, err := v.Verify(ctx, []byte(tok), ForAudience(serverDID))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(d.ID, "urn:uuid:") || len(d.ID) != len("urn:uuid:")+36 || d.DelegationID != strings.TrimPrefix(d.ID, "urn:uuid:") {
			t.Errorf("ID, DelegationID = %q, %q", d.ID, d.DelegationID)
		}
	})
}

func TestIssueRejectsBadInput(t *testing.T) {
	f := newFixture(t)
	ok := Template{AgentDID: f.agent.did, ExpiresAt: time.Now().Add(time.Hour)}
	tests := []struct {
		name string
		key  any
		kid  string
		tmpl Template
	}{
		{"no agent", f.ed.priv, f.ed.kid, Template{ExpiresAt: ok.ExpiresAt}},
		{"no expiry", f.ed.priv, f.ed.kid, Template{AgentDID: f.agent.did}},
		{"window inverted", f.ed.priv, f.ed.kid, Template{AgentDID: f.agent.did, NotBefore: ok.ExpiresAt, ExpiresAt: ok.ExpiresAt}},
		{"kid not a DID", f.ed.priv, "key-1", ok},
		{"unsupported key", "secret", f.ed.kid, ok},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tok, err := IssueJWT(tc.key, tc.kid, tc.tmpl); err == nil {
				t.Errorf("IssueJWT = %q, want an error", tok)
			}
		})
	}
	if _, err := IssueJSON(ed25519.PrivateKey("short"), f.ed.kid, ok); err == nil {
		t.Error("IssueJSON accepted a bad key")
	}
}

// TestInterop verifies tokens signed by other implementations: jwx for
// EdDSA and ES256, decred's compact (recoverable) form for ES256K. This
// pins the R||S layout independently of signJWS.
func TestInterop(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	v := f.verifier()
	jwxSign := func(t *testing.T, alg jwa.SignatureAlgorithm, k testKey) []byte {
		h := jws.NewHeaders()
		if err := h.Set(jws.KeyIDKey, k.kid); err != nil {
			t.Fatal(err)
		}
		if err := h.Set(jws.TypeKey, "JWT"); err != nil {
			t.Fatal(err)
		}
		tok, err := jws.Sign(mustJSON(t, f.vc11Claims(k)), jws.WithKey(alg, k.priv, jws.WithProtectedHeaders(h)))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	t.Run("jwx EdDSA", func(t *testing.T) {
		if _, err := v.Verify(ctx, jwxSign(t, jwa.EdDSA, f.ed), ForAudience(serverDID)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("jwx ES256", func(t *testing.T) {
		if _, err := v.Verify(ctx, jwxSign(t, jwa.ES256, f.p256), ForAudience(serverDID)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("our ES256 verified by jwx", func(t *testing.T) {
		tok, err := IssueJWT(f.p256.priv, f.p256.kid, Template{AgentDID: f.agent.did, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jws.Verify([]byte(tok), jws.WithKey(jwa.ES256, &f.p256.priv.(*ecdsa.PrivateKey).PublicKey)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("decred compact ES256K", func(t *testing.T) {
		input := b64(mustJSON(t, header("ES256K", f.k1.kid))) + "." + b64(mustJSON(t, f.vc11Claims(f.k1)))
		h := sha256.Sum256([]byte(input))
		compact := secpecdsa.SignCompact(f.k1.priv.(*secp256k1.PrivateKey), h[:], true) // recovery byte || R || S
		tok := input + "." + b64(compact[1:])
		if _, err := v.Verify(ctx, []byte(tok), ForAudience(serverDID)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ES256K R >= N refused", func(t *testing.T) {
		input := b64(mustJSON(t, header("ES256K", f.k1.kid))) + "." + b64(mustJSON(t, f.vc11Claims(f.k1)))
		sig := make([]byte, 64)
		for i := range 32 {
			sig[i] = 0xff
		}
		sig[63] = 1
		_, err := v.Verify(ctx, []byte(input+"."+b64(sig)), ForAudience(serverDID))
		if Reason(err) != "bad_signature" {
			t.Fatalf("err = %v, want bad_signature", err)
		}
	})
}
