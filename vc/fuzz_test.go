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

// FuzzVerifyPresentation feeds VP-JWTs and JSON VPs (with chains, nonces
// and audiences) through Verify: no panic, one sentinel per error, never
// the input in a message, and a success is a presentation.
func FuzzVerifyPresentation(f *testing.F) {
	fx := newFixture(f)
	ch := fx.chain3(f, nil)
	leaf := signCred(f, fx.ed, fx.delegationVC(fx.ed, fx.agent.did, "d-1", "", "a"), true)
	f.Add(vpJWT(f, fx.agent, [][]byte{leaf}, nil))
	f.Add(vpJWT(f, fx.agent, [][]byte{ch.root, ch.middle, ch.leaf}, nil))
	f.Add(vpJWT(f, fx.agent, [][]byte{ch.leaf}, func(c map[string]any) { delete(c, "aud") }))
	f.Add(flipSignatureBit(f, vpJWT(f, fx.agent, [][]byte{leaf}, nil)))
	f.Add(signVPEd25519JCS(f, fx.agent, jsonVP(f, fx.agent, [][]byte{leaf, ch.root}), vpProofOptions(fx.agent)))
	f.Add(signVPEddsaJCS2022(f, fx.agent, jsonVP(f, fx.agent, [][]byte{ch.middle, ch.leaf}), vpProofOptions(fx.agent)))
	f.Add([]byte(`{"type":"VerifiablePresentation","holder":"did:key:z","verifiableCredential":[{"type":"EnvelopedVerifiableCredential","id":"data:application/vc+jwt,a.b.c"},"x.y.z",{}],"proof":{"type":"Ed25519Signature2020","verificationMethod":"#k","challenge":"n-1","domain":["a"],"proofValue":"z1"}}`))
	f.Add([]byte(`{"type":["VerifiablePresentation"],"verifiableCredential":null,"proof":[]}`))
	f.Add(mint(f, fx.agent.priv, map[string]any{"alg": "EdDSA", "typ": "vp+jwt"}, map[string]any{"type": "VerifiablePresentation", "verifiableCredential": "x"}))
	v := fx.verifier(WithoutStatusCheck(), WithReplayGuard(&memGuard{}))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := v.Verify(ctx, raw, ForAudience(serverDID), WithPresentationNonce(func(string, string) error { return nil }),
			WithAncestors(ch.root, ch.middle))
		checkVerifyResult(t, raw, d, err)
		if err == nil && !d.Presented && isJSONPresentation(bytes.TrimSpace(raw)) {
			t.Fatal("a JSON presentation verified as a bare credential")
		}
	})
}

// FuzzDecodeStatusList: any encodedList decodes within the cap or fails,
// and reading any index of a decoded list is safe.
func FuzzDecodeStatusList(f *testing.F) {
	f.Add(encodeList(f, 131072, false, 7, 42), uint32(42))
	f.Add(encodeList(f, 64, true, 0), uint32(0))
	f.Add("H4sIAAAAAAAAE-3BMQEAAAjAoEWxf0pt4QPUmQAAAAAAAAAAAAAAAAAAAIBHCzOa7TAAQAAA", uint32(7))
	f.Add("u", uint32(1))
	f.Add("H4sI", uint32(1<<31))
	f.Fuzz(func(t *testing.T, encoded string, index uint32) {
		const limit = 1 << 16
		bits, err := decodeStatusList(encoded, limit)
		if err != nil {
			return
		}
		if len(bits) == 0 || len(bits) > limit {
			t.Fatalf("%d bytes decoded", len(bits))
		}
		if uint64(index) < uint64(len(bits))*8 {
			_ = bits[index/8] & (0x80 >> (index % 8))
		}
	})
}
