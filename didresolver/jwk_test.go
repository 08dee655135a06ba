package didresolver

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
)

func TestPrivateJWKRoundTrip(t *testing.T) {
	for _, kt := range []KeyType{Ed25519, P256, Secp256k1} {
		t.Run(string(kt), func(t *testing.T) {
			priv, err := GenerateKey(kt)
			if err != nil {
				t.Fatal(err)
			}
			data, err := MarshalPrivateJWK(priv, "edge-1")
			if err != nil {
				t.Fatal(err)
			}
			got, kid, err := ParsePrivateJWK(data)
			if err != nil {
				t.Fatal(err)
			}
			if kid != "edge-1" {
				t.Fatalf("kid = %q", kid)
			}
			switch want := priv.(type) {
			case ed25519.PrivateKey:
				if !want.Equal(got) {
					t.Fatal("Ed25519 key differs")
				}
			case *ecdsa.PrivateKey:
				if !want.Equal(got) {
					t.Fatal("P-256 key differs")
				}
			case *secp256k1.PrivateKey:
				g, ok := got.(*secp256k1.PrivateKey)
				if !ok || !want.Key.Equals(&g.Key) {
					t.Fatal("secp256k1 key differs")
				}
			}
			// Without a kid the member is omitted, and the public JWK
			// never carries d.
			data, err = MarshalPrivateJWK(priv, "")
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			if _, ok := m["kid"]; ok {
				t.Fatal("empty kid was written")
			}
			pub, _ := PublicKeyOf(priv)
			pj, err := PublicJWK(pub)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := pj["d"]; ok {
				t.Fatal("public JWK has d")
			}
			back, err := parseJWK(pj, false)
			if err != nil || !samePublicKey(pub, back) {
				t.Fatalf("public JWK round trip: %v", err)
			}
		})
	}
}

func TestParsePrivateJWKInvalid(t *testing.T) {
	edPriv, _ := GenerateKey(Ed25519)
	other, _ := GenerateKey(Ed25519)
	p256, _ := GenerateKey(P256)
	k1, _ := GenerateKey(Secp256k1)
	jwkOf := func(priv any) map[string]any {
		data, err := MarshalPrivateJWK(priv, "k")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	with := func(m map[string]any, k string, v any) []byte {
		c := make(map[string]any, len(m))
		for kk, vv := range m {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		b, _ := json.Marshal(c)
		return b
	}
	ed, p, s := jwkOf(edPriv), jwkOf(p256), jwkOf(k1)
	order := "_____wAAAAD__________7zm-q2nF56E87nKwvxjJVE" // P-256 group order n
	k1Order := "_____________________rqu3OavSKA7v9JejNA2QUE"
	tests := map[string][]byte{
		"not json":             []byte("{"),
		"array":                []byte("[]"),
		"null":                 []byte("null"),
		"no d":                 with(ed, "d", nil),
		"d not string":         with(ed, "d", 7),
		"d short":              with(ed, "d", "AAAA"),
		"d mismatched":         with(ed, "d", jwkOf(other)["d"]),
		"kid not string":       with(ed, "kid", 5),
		"unknown kty":          with(ed, "kty", "RSA"),
		"x25519":               with(ed, "crv", "X25519"),
		"p256 d mismatched":    with(p, "d", s["d"]),
		"p256 d zero":          with(p, "d", b64(make([]byte, 32))),
		"p256 d = n":           with(p, "d", order),
		"secp256k1 d zero":     with(s, "d", b64(make([]byte, 32))),
		"secp256k1 d = n":      with(s, "d", k1Order),
		"secp256k1 mismatched": with(s, "d", p["d"]),
		"padded x":             with(ed, "x", ed["x"].(string)+"="),
		"p384":                 with(p, "crv", "P-384"),
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := ParsePrivateJWK(data)
			wantErr(t, err, ErrUnsupportedKey)
			checkOneSentinel(t, err)
		})
	}
}

func TestJWKDID(t *testing.T) {
	// Example 1 of the did:jwk method specification.
	const spec = "did:jwk:eyJjcnYiOiJQLTI1NiIsImt0eSI6IkVDIiwieCI6ImFjYklRaXVNczNpOF91c3pFakoydHBUdFJNNEVVM3l6OTFQSDZDZEgyVjAiLCJ5IjoiX0tjeUxqOXZXTXB0bm1LdG00NkdxRHo4d2Y3NEk1TEtncmwyR3pIM25TRSJ9"
	r := New()
	doc, err := r.Resolve(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if doc.ID != spec || len(doc.VerificationMethod) != 1 || doc.VerificationMethod[0].ID != spec+"#0" || doc.VerificationMethod[0].Type != "JsonWebKey2020" {
		t.Fatalf("document: %+v", doc)
	}
	k, err := ResolveKey(context.Background(), r, spec+"#0", Authentication)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := k.Public.(*ecdsa.PublicKey); !ok {
		t.Fatalf("key %T", k.Public)
	}
	// The serialisation is canonical: the spec's own DID comes back.
	if again, err := JWKDID(k.Public); err != nil || again != spec {
		t.Fatalf("JWKDID = %q, %v", again, err)
	}

	for _, kt := range []KeyType{Ed25519, P256, Secp256k1} {
		t.Run(string(kt), func(t *testing.T) {
			pub := mustGenerate(t, kt)
			did, err := JWKDID(pub)
			if err != nil {
				t.Fatal(err)
			}
			k, err := ResolveKey(context.Background(), r, did, AssertionMethod)
			if err != nil {
				t.Fatal(err)
			}
			if k.ID != did+"#0" || !samePublicKey(pub, k.Public) {
				t.Fatalf("got %q", k.ID)
			}
		})
	}
}

func TestJWKDIDInvalid(t *testing.T) {
	enc := func(s string) string { return "did:jwk:" + base64.RawURLEncoding.EncodeToString([]byte(s)) }
	pub := mustGenerate(t, Ed25519)
	pj, _ := PublicJWK(pub)
	x := pj["x"].(string)
	tests := []struct {
		name string
		did  string
		err  error
	}{
		// Example 2 of the did:jwk spec: an X25519 encryption key.
		{"x25519", "did:jwk:eyJrdHkiOiJPS1AiLCJjcnYiOiJYMjU1MTkiLCJ1c2UiOiJlbmMiLCJ4IjoiM3A3YmZYdDl3YlRUVzJIQzdPUTFOei1EUThoYmVHZE5yZngtRkctSUswOCJ9", ErrUnsupportedKey},
		{"not base64", "did:jwk:%%%", ErrInvalidDID},
		{"padding", "did:jwk:" + base64.URLEncoding.EncodeToString([]byte(`{"kty":"OKP"}`)), ErrInvalidDID},
		{"not json", enc("not json"), ErrInvalidDID},
		{"json array", enc(`[1]`), ErrInvalidDID},
		{"json null", enc(`null`), ErrInvalidDID},
		{"private key", enc(`{"kty":"OKP","crv":"Ed25519","x":"` + x + `","d":"` + x + `"}`), ErrUnsupportedKey},
		{"bad use", enc(`{"kty":"OKP","crv":"Ed25519","x":"` + x + `","use":"both"}`), ErrInvalidDID},
		{"x not string", enc(`{"kty":"OKP","crv":"Ed25519","x":1}`), ErrUnsupportedKey},
		{"ec off curve", enc(`{"kty":"EC","crv":"P-256","x":"` + b64(make([]byte, 32)) + `","y":"` + b64(make([]byte, 32)) + `"}`), ErrUnsupportedKey},
		{"k1 off curve", enc(`{"kty":"EC","crv":"secp256k1","x":"` + b64(make([]byte, 32)) + `","y":"` + b64(make([]byte, 32)) + `"}`), ErrUnsupportedKey},
		{"ec missing y", enc(`{"kty":"EC","crv":"P-256","x":"` + x + `"}`), ErrUnsupportedKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New().Resolve(context.Background(), tc.did)
			wantErr(t, err, tc.err)
			checkOneSentinel(t, err)
		})
	}

	// An "enc" key is resolvable but authorizes nothing this package models.
	did := enc(`{"kty":"OKP","crv":"Ed25519","x":"` + x + `","use":"enc"}`)
	doc, err := New().Resolve(context.Background(), did)
	if err != nil {
		t.Fatal(err)
	}
	_, err = doc.Key("#0", Authentication)
	wantErr(t, err, ErrKeyNotAuthorized)
	_, err = ResolveKey(context.Background(), New(), did, AssertionMethod)
	wantErr(t, err, ErrKeyNotFound)
}

func TestGenerateKeyUnknown(t *testing.T) {
	_, err := GenerateKey("rsa")
	wantErr(t, err, ErrUnsupportedKey)
	for name, priv := range map[string]any{
		"nil":        nil,
		"short ed":   ed25519.PrivateKey(make([]byte, 10)),
		"nil secp":   (*secp256k1.PrivateKey)(nil),
		"nil ecdsa":  (*ecdsa.PrivateKey)(nil),
		"wrong type": "key",
	} {
		_, err := PublicKeyOf(priv)
		if !errorsIs(err, ErrUnsupportedKey) {
			t.Errorf("%s: PublicKeyOf error %v", name, err)
		}
		if _, err := MarshalPrivateJWK(priv, ""); !errorsIs(err, ErrUnsupportedKey) {
			t.Errorf("%s: MarshalPrivateJWK error %v", name, err)
		}
	}
}
