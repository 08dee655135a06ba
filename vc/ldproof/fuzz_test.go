package ldproof

import (
	"context"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// FuzzLDVerify: whatever the input, Verify returns (no panic, no hang)
// nil or an error wrapping one of the sentinels.
func FuzzLDVerify(f *testing.F) {
	v := newVerifier(f)
	inline := newVerifier(f, WithInlineContexts()) // reaches more of json-gold
	loader := signerLoader(f, nil)
	ed := newKey(f, didresolver.Ed25519)
	p256 := newKey(f, didresolver.P256)
	k1 := newKey(f, didresolver.Secp256k1)
	keys := []didresolver.Key{ed.key, p256.key, k1.key, multikeyEd25519(f, "z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2")}

	for _, file := range []string{"w3c-eddsa-rdfc-2022.json", "w3c-ed25519signature2020.json",
		"didkey-ed25519signature2018.json", "transmute-ed25519signature2018.json"} {
		f.Add(readFile(f, "testdata/"+file), uint8(3))
	}
	f.Add(mustJSON(f, signLD(f, loader, delegation("did:key:issuer"), TypeEd25519Signature2020, algEdDSA, ed)), uint8(0))
	f.Add(mustJSON(f, signLD(f, loader, delegation("did:key:issuer"), TypeEd25519Signature2018, algEdDSA, ed)), uint8(0))
	f.Add(mustJSON(f, signRdfc2022(f, loader, delegation("did:key:issuer"), ed)), uint8(0))
	jws2020 := delegation("did:key:issuer")
	jws2020["@context"] = append(jws2020["@context"].([]any), "https://w3id.org/security/suites/jws-2020/v1")
	f.Add(mustJSON(f, signLD(f, loader, jws2020, TypeJsonWebSignature2020, algES256, p256)), uint8(1))
	f.Add(mustJSON(f, signLD(f, loader, delegation("did:key:issuer"), TypeEcdsaSecp256k1Signature2019, algES256K, k1)), uint8(2))
	f.Add([]byte(`{"@context":"https://www.w3.org/ns/credentials/v2","proof":{"type":"DataIntegrityProof","cryptosuite":"eddsa-rdfc-2022","proofValue":"z1"}}`), uint8(0))
	f.Add([]byte(`{"@context":[{"@vocab":"x:"}],"a":{"@id":"_:b0","b":{"@id":"_:b0"}},"proof":{"type":"Ed25519Signature2020","created":"2020-01-01T00:00:00Z","proofValue":"z1"}}`), uint8(0x80))
	f.Add([]byte(`{"@context":["https://www.w3.org/ns/credentials/v2"],"type":"VerifiablePresentation","verifiableCredential":5,"proof":{"type":"Ed25519Signature2018","created":"2020-01-01T00:00:00Z","jws":"eyJhbGciOiJFZERTQSIsImI2NCI6ZmFsc2UsImNyaXQiOlsiYjY0Il19..AA"}}`), uint8(0))
	f.Add([]byte(`{}`), uint8(0))

	f.Fuzz(func(t *testing.T, raw []byte, k uint8) {
		start := time.Now()
		ver := v
		if k&0x80 != 0 {
			ver = inline
		}
		err := ver.Verify(context.Background(), raw, keys[int(k&0x7f)%len(keys)])
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Verify took %v", d) // URDNA2015 blank node limits
		}
		checkResult(t, err)
	})
}
