package didresolver

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/mr-tron/base58"
)

func TestKyaOSDIDKeyVectors(t *testing.T) {
	vf := loadVectors(t, "did-key-resolution.json")
	for _, v := range vf.Vectors {
		t.Run(v.ID, func(t *testing.T) {
			// The vectors exercise a did:key-only resolver: a did:web input
			// must not resolve through it.
			d, err := ParseDID(v.Input.DID)
			var doc *Document
			if err == nil {
				doc, err = resolveKeyDID(d)
			}
			checkOneSentinel(t, err)
			switch v.Expected {
			case "pass":
				if err != nil {
					t.Fatalf("resolve: %v", err)
				}
				keys := doc.Keys(AssertionMethod)
				if len(doc.VerificationMethod) != 1 || len(keys) != 1 {
					t.Fatalf("want a single verification method, got %d methods, %d keys", len(doc.VerificationMethod), len(keys))
				}
				if _, ok := keys[0].Public.(ed25519.PublicKey); !ok {
					t.Fatalf("key is %T, want Ed25519", keys[0].Public)
				}
				if doc.VerificationMethod[0].Type != "Ed25519VerificationKey2020" {
					t.Fatalf("type = %q", doc.VerificationMethod[0].Type)
				}
			case "fail":
				if err == nil {
					t.Fatal("resolved, want failure")
				}
			default:
				t.Fatalf("unknown expectation %q", v.Expected)
			}
		})
	}
	// The vectors' wrong-method case, through the full router, must fail
	// for the same reason: not because did:web is unsupported there, but
	// the did:key resolver itself must refuse it.
	if _, err := resolveKeyDID(DID{Method: "web", ID: "example.com"}); !errorsIs(err, ErrUnsupportedMethod) {
		t.Fatalf("did:key resolver on did:web: %v", err)
	}
}

// TestDIDKeyKnownKeys pins the encoding against keys whose did:key is known
// from elsewhere: the kya-os did:web vector gives the same Ed25519 key as a
// JWK and as a multibase, and the did:key spec gives a P-256 key.
func TestDIDKeyKnownKeys(t *testing.T) {
	x, _ := base64.RawURLEncoding.DecodeString("zIbzE7nNFfU0i62mv43FWCPYS4i5sS8-NeRy_O7ptW8")
	did, kid, err := KeyDID(ed25519.PublicKey(x))
	if err != nil {
		t.Fatal(err)
	}
	if did != "did:key:z6MktDeZmp9n8K334seLnTYeKkePNmWRfSVhoighWct9zK74" || kid != did+"#z6MktDeZmp9n8K334seLnTYeKkePNmWRfSVhoighWct9zK74" {
		t.Fatalf("KeyDID = %q, %q", did, kid)
	}

	p256, err := parseJWK(map[string]any{"kty": "EC", "crv": "P-256",
		"x": "fyNYMN0976ci7xqiSdag3buk-ZCwgXU4kz9XNkBlNUI", "y": "hW2ojTNfH7Jbi8--CJUo3OCbH3y5n91g-IMA9MLMbTU"}, false)
	if err != nil {
		t.Fatal(err)
	}
	did, _, err = KeyDID(p256)
	if err != nil {
		t.Fatal(err)
	}
	const wantP256 = "did:key:zDnaerDaTF5BXEavCrfRZEk316dpbLsfPDZ3WJ5hRTPFU2169"
	if did != wantP256 {
		t.Fatalf("P-256 KeyDID = %q", did)
	}
	doc, err := New().Resolve(context.Background(), wantP256)
	if err != nil {
		t.Fatal(err)
	}
	k, err := doc.Key("#zDnaerDaTF5BXEavCrfRZEk316dpbLsfPDZ3WJ5hRTPFU2169", Authentication)
	if err != nil {
		t.Fatal(err)
	}
	if !p256.(*ecdsa.PublicKey).Equal(k.Public) {
		t.Fatal("resolved P-256 key differs")
	}
	if doc.VerificationMethod[0].Type != "JsonWebKey2020" {
		t.Fatalf("P-256 method type %q", doc.VerificationMethod[0].Type)
	}

	// secp256k1 example from the did:key spec.
	const k1 = "did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme"
	doc, err = New().Resolve(context.Background(), k1)
	if err != nil {
		t.Fatal(err)
	}
	keys := doc.Keys(AssertionMethod)
	if len(keys) != 1 {
		t.Fatalf("%d keys", len(keys))
	}
	if _, ok := keys[0].Public.(*secp256k1.PublicKey); !ok {
		t.Fatalf("key is %T", keys[0].Public)
	}
	if doc.VerificationMethod[0].Type != "EcdsaSecp256k1VerificationKey2019" {
		t.Fatalf("secp256k1 method type %q", doc.VerificationMethod[0].Type)
	}
	if again, _, _ := KeyDID(keys[0].Public); again != k1 {
		t.Fatalf("secp256k1 round trip: %q", again)
	}
}

func mb(prefix string, key []byte) string {
	p, _ := hex.DecodeString(prefix)
	return "did:key:z" + base58.Encode(append(p, key...))
}

func TestDIDKeyMalformed(t *testing.T) {
	ed := make([]byte, 32)
	k1Off := offCurve(func(b []byte) bool { _, err := secp256k1.ParsePubKey(b); return err == nil })
	p256Off := offCurve(func(b []byte) bool { x, _ := elliptic.UnmarshalCompressed(elliptic.P256(), b); return x != nil })
	k1, _ := secp256k1.GeneratePrivateKey()
	k1c := k1.PubKey().SerializeCompressed()
	tests := []struct {
		name string
		did  string
		err  error
	}{
		{"ok zero ed25519 bytes", mb("ed01", ed), nil},
		{"ok secp256k1", mb("e701", k1c), nil},
		{"not multibase z", "did:key:6MkiupQ1QPitvNtmEwCb47mkfCtCoU9A6znu7ECSqyFbVXH", ErrInvalidDID},
		{"base64 multibase", "did:key:mO0wBAA", ErrInvalidDID},
		{"only prefix", "did:key:z", ErrInvalidDID},
		{"bad base58 char 0", "did:key:z6Mk0OIl", ErrInvalidDID},
		{"bad DID chars", "did:key:z6MkNOTVALIDbase58!!!!", ErrInvalidDID},
		{"too long", "did:key:z" + base58.Encode(bytesOf(0xff, 120)), ErrInvalidDID},
		{"unknown multicodec x25519", mb("ec01", ed), ErrUnsupportedKey},
		{"unknown multicodec rsa", mb("8524", ed), ErrUnsupportedKey},
		{"no multicodec", "did:key:z" + base58.Encode(ed), ErrUnsupportedKey},
		{"ed25519 short", mb("ed01", ed[:31]), ErrUnsupportedKey},
		{"ed25519 long", mb("ed01", append(ed, 0)), ErrUnsupportedKey},
		{"secp256k1 uncompressed", mb("e701", k1.PubKey().SerializeUncompressed()), ErrUnsupportedKey},
		{"secp256k1 short", mb("e701", k1c[:32]), ErrUnsupportedKey},
		{"secp256k1 bad prefix", mb("e701", append([]byte{0x05}, k1c[1:]...)), ErrUnsupportedKey},
		{"secp256k1 off curve", mb("e701", k1Off), ErrUnsupportedKey},
		{"p256 off curve", mb("8024", p256Off), ErrUnsupportedKey},
		{"p256 x >= p", mb("8024", append([]byte{0x02}, bytesOf(0xff, 32)...)), ErrUnsupportedKey},
		{"p256 short", mb("8024", p256Off[:20]), ErrUnsupportedKey},
		{"wrong method", "did:web:example.com", ErrUnsupportedMethod},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDID(tc.did)
			if err == nil {
				_, err = resolveKeyDID(d)
			}
			wantErr(t, err, tc.err)
			checkOneSentinel(t, err)
		})
	}
}

// offCurve returns a compressed encoding whose x has no point on the curve,
// as judged by the curve library itself.
func offCurve(valid func([]byte) bool) []byte {
	for x := byte(1); ; x++ {
		b := append([]byte{0x02}, make([]byte, 32)...)
		b[32] = x
		if !valid(b) {
			return b
		}
	}
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

func TestKeyDIDRoundTrip(t *testing.T) {
	r := New()
	for _, kt := range []KeyType{Ed25519, P256, Secp256k1} {
		t.Run(string(kt), func(t *testing.T) {
			for range 20 { // both y parities show up
				pub := mustGenerate(t, kt)
				did, kid, err := KeyDID(pub)
				if err != nil {
					t.Fatal(err)
				}
				doc, err := r.Resolve(context.Background(), did)
				if err != nil {
					t.Fatal(err)
				}
				if doc.ID != did {
					t.Fatalf("doc id %q", doc.ID)
				}
				for _, rel := range []Relationship{Authentication, AssertionMethod} {
					k, err := doc.Key(kid, rel)
					if err != nil {
						t.Fatal(err)
					}
					if k.ID != kid || !samePublicKey(pub, k.Public) {
						t.Fatalf("%s: got %q %v", rel, k.ID, k.Public)
					}
				}
				k, err := ResolveKey(context.Background(), r, kid, AssertionMethod)
				if err != nil || !samePublicKey(pub, k.Public) {
					t.Fatalf("ResolveKey: %v", err)
				}
			}
		})
	}
}

func TestKeyDIDUnsupported(t *testing.T) {
	for name, pub := range map[string]any{
		"nil":           nil,
		"short ed":      ed25519.PublicKey(make([]byte, 31)),
		"rsa-ish":       "not a key",
		"nil secp":      (*secp256k1.PublicKey)(nil),
		"nil ecdsa":     (*ecdsa.PublicKey)(nil),
		"secp as ecdsa": k1AsECDSA(t),
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := KeyDID(pub)
			wantErr(t, err, ErrUnsupportedKey)
			_, err = JWKDID(pub)
			wantErr(t, err, ErrUnsupportedKey)
		})
	}
}

func k1AsECDSA(t *testing.T) *ecdsa.PublicKey {
	k, err := secp256k1.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PubKey().ToECDSA()
}
