package vc

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"
)

const testJKT = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"

// mintWithCnf signs the fixture's VC-JWT claims by f.ed with cnf spliced in
// as raw JSON text (so repeats and odd spellings reach the verifier).
func mintWithCnf(t *testing.T, f *fixture, cnf string) []byte {
	t.Helper()
	claims := string(mustJSON(t, f.vc11Claims(f.ed)))
	claims = "{" + cnf + "," + claims[1:]
	input := b64(mustJSON(t, header(AlgEdDSA, f.ed.kid))) + "." + b64([]byte(claims))
	sig, err := signJWS(f.ed.priv, []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(input + "." + b64(sig))
}

func TestCnfJKTRead(t *testing.T) {
	f := newFixture(t)
	v := f.verifier()
	raw := mintWithCnf(t, f, `"cnf":{"jkt":"`+testJKT+`"}`)
	d, err := v.Verify(context.Background(), raw, ForAudience(serverDID))
	if err != nil {
		t.Fatal(err)
	}
	if d.CnfJKT != testJKT {
		t.Fatalf("CnfJKT = %q", d.CnfJKT)
	}
	// A lone case variant is read as encoding/json reads it: bound, the
	// stricter of the two readings.
	if d, err := v.Verify(context.Background(), mintWithCnf(t, f, `"CNF":{"jkt":"`+testJKT+`"}`), ForAudience(serverDID)); err != nil || d.CnfJKT != testJKT {
		t.Fatalf("CNF: %v", err)
	}
	// Without cnf (or with null) the credential is unbound.
	for _, cnf := range []string{`"x":1`, `"cnf":null`} {
		d, err := v.Verify(context.Background(), mintWithCnf(t, f, cnf), ForAudience(serverDID))
		if err != nil || d.CnfJKT != "" {
			t.Fatalf("%s: %v, CnfJKT %q", cnf, err, d.CnfJKT)
		}
	}
}

func TestCnfMalformedRefused(t *testing.T) {
	f := newFixture(t)
	v := f.verifier()
	for name, cnf := range map[string]string{
		"a string":          `"cnf":"` + testJKT + `"`,
		"an array":          `"cnf":["` + testJKT + `"]`,
		"empty":             `"cnf":{}`,
		"jkt a number":      `"cnf":{"jkt":1}`,
		"jkt short":         `"cnf":{"jkt":"abc"}`,
		"jkt long":          `"cnf":{"jkt":"` + testJKT + `AA"}`,
		"jkt not base64url": `"cnf":{"jkt":"` + strings.Replace(testJKT, "-", "+", 1) + `"}`,
		"jkt and jwk":       `"cnf":{"jkt":"` + testJKT + `","jwk":{"kty":"OKP"}}`,
		"jwk only":          `"cnf":{"jwk":{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}}`,
		"jkt repeated":      `"cnf":{"jkt":"` + testJKT + `","jkt":"` + testJKT + `"}`,
		"jkt case variant":  `"cnf":{"JKT":"` + testJKT + `"}`,
		"cnf repeated":      `"cnf":{"jkt":"` + testJKT + `"},"cnf":null`,
	} {
		t.Run(name, func(t *testing.T) {
			d, err := v.Verify(context.Background(), mintWithCnf(t, f, cnf), ForAudience(serverDID))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Verify = %+v, %v; want ErrMalformed", d, err)
			}
		})
	}
}

func TestIssueJWTWithCnf(t *testing.T) {
	f := newFixture(t)
	raw, err := IssueJWT(f.ed.priv, f.ed.kid, Template{AgentDID: f.agent.did, Audience: []string{serverDID}, ExpiresAt: time.Now().Add(time.Hour), CnfJKT: testJKT})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewVerifier(f.res).Verify(context.Background(), []byte(raw), ForAudience(serverDID))
	if err != nil || d.CnfJKT != testJKT {
		t.Fatalf("Verify: %v, CnfJKT %q", err, d.CnfJKT)
	}
	if _, err := IssueJWT(f.ed.priv, f.ed.kid, Template{AgentDID: f.agent.did, ExpiresAt: time.Now().Add(time.Hour), CnfJKT: "not-a-thumbprint"}); err == nil {
		t.Fatal("IssueJWT took a CnfJKT that is no thumbprint")
	}
	if _, err := IssueJSON(f.ed.priv.(ed25519.PrivateKey), f.ed.kid, Template{AgentDID: f.agent.did, ExpiresAt: time.Now().Add(time.Hour), CnfJKT: testJKT}); err == nil {
		t.Fatal("IssueJSON took a CnfJKT")
	}
}
