package vc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strings"
	"testing"
)

// checkVerifyResult asserts what must hold for any input: an error wraps
// exactly one sentinel and does not quote the input; a success describes a
// signed credential and hashes the trimmed input.
func checkVerifyResult(t *testing.T, raw []byte, d *Delegation, err error) {
	if err != nil {
		if d != nil {
			t.Fatal("delegation returned with an error")
		}
		if n := sentinelCount(err); n != 1 {
			t.Fatalf("error %q wraps %d sentinels", err, n)
		}
		if len(raw) >= 24 && strings.Contains(err.Error(), string(raw[:24])) {
			t.Fatalf("error quotes the input: %q", err)
		}
		return
	}
	if d.AgentDID == "" || d.Issuer == "" || d.UserDID == "" || d.Format == "" {
		t.Fatalf("incomplete delegation: %+v", d)
	}
	if d.Hash != sha256.Sum256(bytes.TrimSpace(raw)) {
		t.Fatal("Hash is not over the trimmed input")
	}
}

func FuzzVerifyJWT(f *testing.F) {
	fx := newFixture(f)
	v := fx.verifier()
	for _, k := range []testKey{fx.ed, fx.p256, fx.k1} {
		tok := mint(f, k.priv, header(algOf(f, k), k.kid), fx.vc11Claims(k))
		f.Add(tok)
		f.Add(flipSignatureBit(f, bytes.Clone(tok)))
	}
	h := header("EdDSA", fx.ed.kid)
	h["typ"] = "vc+jwt"
	f.Add(mint(f, fx.ed.priv, h, fx.vc20Payload(fx.ed)))
	f.Add(mint(f, nil, header("none", fx.ed.kid), fx.vc11Claims(fx.ed)))
	f.Add(mint(f, fx.ed.priv, header("EdDSA", fx.ed.kid), map[string]any{"iss": fx.ed.did, "scope": "a"}))
	f.Add([]byte("eyJhbGciOiJFZERTQSJ9.e30."))
	f.Add([]byte(".."))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := v.Verify(ctx, raw, ForAudience(serverDID))
		checkVerifyResult(t, raw, d, err)
	})
}

func FuzzVerifyJSONVC(f *testing.F) {
	fx := newFixture(f)
	v := fx.verifier()
	f.Add(signEd25519JCS(f, fx.ed, fx.jsonCredential(fx.ed), false))
	f.Add(signEd25519JCS(f, fx.ed, fx.jsonCredential(fx.ed), true))
	f.Add(signEddsaJCS2022(f, fx.ed, fx.jsonCredential(fx.ed), nil))
	f.Add(signEddsaJCS2022(f, fx.ed, fx.jsonCredential(fx.ed), []any{"https://www.w3.org/2018/credentials/v1"}))
	f.Add(mustJSON(f, fx.jsonCredential(fx.ed)))
	f.Add([]byte(`{"type":["VerifiableCredential","DelegationCredential"],"issuer":{"id":"did:key:z"},"credentialSubject":[{"id":"a"}],"proof":{"type":"Ed25519Signature2020","verificationMethod":"#k","proofValue":"z1"}}`))
	f.Add([]byte(`{"proof":[{}]}`))
	f.Add([]byte(`{"@context":[{"a":1e400}],"proof":{"type":"DataIntegrityProof","cryptosuite":"eddsa-jcs-2022","@context":[]}}`))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := v.Verify(ctx, raw, ForAudience(serverDID))
		checkVerifyResult(t, raw, d, err)
	})
}
