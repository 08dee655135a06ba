package edge

import (
	"crypto"
	"crypto/ed25519"
	"net/http"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// keyThumbprint is the RFC 7638 thumbprint of pub, as a bound credential's
// cnf.jkt names it.
func keyThumbprint(t testing.TB, pub crypto.PublicKey) string {
	t.Helper()
	k, err := jwk.FromRaw(pub)
	if err != nil {
		t.Fatal(err)
	}
	jkt, err := dpop.Thumbprint(k)
	if err != nil {
		t.Fatal(err)
	}
	return jkt
}

// TestRequestProofCnfFusion: under a DPoP-bound credential, a KYA-OS
// request proof must name the bound key in its cnf (KYA-OS cnf fusion);
// one without cnf is a downgrade, refused (cnf_required_by_token). Under an
// unbound credential a proof without cnf is fine.
func TestRequestProofCnfFusion(t *testing.T) {
	f := newFixture(t)
	key := f.agent.priv.(ed25519.PrivateKey)
	jkt := keyThumbprint(t, key.Public())
	bound := f.jwt(t, func(tm *vc.Template) { tm.CnfJKT = jkt })
	h := f.handler(t, nil)
	call := func(cred string, isDPoP, cnf bool) result {
		body, _, err := kyaos.SignRequest([]byte(toolsCallBody), key, kyaos.SignOptions{KID: f.agent.kid, Audience: testAudience, Cnf: cnf})
		if err != nil {
			t.Fatal(err)
		}
		r := newRequest(http.MethodPost, "/mcp", string(body))
		if !isDPoP {
			r.Header.Set("Authorization", "Bearer "+cred)
			return serve(t, h, r)
		}
		r.Header.Set("Authorization", "DPoP "+cred)
		proof, err := dpop.NewProof(key, http.MethodPost, "http://"+testHost+"/mcp", cred, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("DPoP", proof)
		return serve(t, h, r)
	}
	if res := call(bound, true, true); !res.called {
		t.Fatalf("bound credential, proof with the bound cnf: %d %s", res.rec.Code, res.rec.Body)
	}
	res := call(bound, true, false)
	if res.called || res.rec.Code != http.StatusUnauthorized || decodeProofRPC(t, res.rec).Error.Data.Reasons[0] != "cnf_required_by_token" {
		t.Fatalf("bound credential, proof without cnf: %d %s", res.rec.Code, res.rec.Body)
	}
	if res := call(f.jwt(t, nil), false, false); !res.called {
		t.Fatalf("unbound credential, proof without cnf: %d %s", res.rec.Code, res.rec.Body)
	}
}
