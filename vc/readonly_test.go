package vc

import (
	"bytes"
	"context"
	"testing"
)

// TestVerifyLeavesInputUnchanged: Verify never writes into the credential
// it is given, whatever its shape and outcome (vc/cache checks the same
// of its hits). The edge passes a header's bytes without copying them
// (carrier.headerBytes), so a write would change a Go string.
func TestVerifyLeavesInputUnchanged(t *testing.T) {
	f := newFixture(t)
	good := mint(t, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed))
	tampered := bytes.Clone(good)
	tampered[len(tampered)-3] ^= 1
	inputs := map[string][]byte{
		"valid VC-JWT":     good,
		"bad signature":    tampered,
		"padded":           append(append([]byte(" \t"), good...), '\n'),
		"truncated":        good[:len(good)/2],
		"JSON VC":          []byte(`{"@context":["https://www.w3.org/2018/credentials/v1"],"type":["VerifiableCredential"],"issuer":"did:key:z6Mk","credentialSubject":{"id":"did:key:z6Mk\u00e9"},"proof":{"type":"Ed25519Signature2020","proofValue":"z3"}}`),
		"JSON VP":          []byte(`{"@context":["https://www.w3.org/2018/credentials/v1"],"type":["VerifiablePresentation"],"verifiableCredential":["a.b.c"],"proof":{"type":"DataIntegrityProof"}}`),
		"escaped JSON":     []byte(`{"issuer":"did:web:a\\u002eexample","type":"x"}`),
		"three dots":       []byte("a.b.c.d"),
		"base64 with junk": []byte("eyJhbGciOiJFZERTQSJ9.eyJpc3Mi!.c2ln"),
	}
	v := f.verifier()
	for name, raw := range inputs {
		want := bytes.Clone(raw)
		for range 2 { // the first call must leave the input as the second reads it
			_, err := v.Verify(context.Background(), raw, ForAudience(serverDID))
			if ok := name == "valid VC-JWT" || name == "padded"; ok != (err == nil) {
				t.Fatalf("%s: Verify: %v", name, err)
			}
		}
		if !bytes.Equal(raw, want) {
			t.Errorf("%s: Verify changed its input", name)
		}
	}
}
