package dpop_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

var b64 = base64.RawURLEncoding.EncodeToString

// testNow is the checkers' clock in the tests.
var testNow = time.Unix(1_800_000_000, 0)

const (
	testURL   = "https://edge.example/mcp"
	testToken = "header.payload.signature"
)

// testKey is a client's DPoP key pair.
type testKey struct {
	ed  ed25519.PrivateKey
	ec  *ecdsa.PrivateKey
	jwk map[string]any
	alg string
}

func newEdKey(t testing.TB) *testKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{ed: priv, alg: "EdDSA", jwk: map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(pub)}}
}

func newECKey(t testing.TB) *testKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x, y := make([]byte, 32), make([]byte, 32)
	priv.X.FillBytes(x)
	priv.Y.FillBytes(y)
	return &testKey{ec: priv, alg: "ES256", jwk: map[string]any{"kty": "EC", "crv": "P-256", "x": b64(x), "y": b64(y)}}
}

func (k *testKey) sign(input []byte) []byte {
	if k.ed != nil {
		return ed25519.Sign(k.ed, input)
	}
	h := sha256.Sum256(input)
	r, s, err := ecdsa.Sign(rand.Reader, k.ec, h[:])
	if err != nil {
		panic(err)
	}
	out := make([]byte, 64)
	r.FillBytes(out[:32])
	s.FillBytes(out[32:])
	return out
}

// proofParts are the header and claims of a proof, for tests to alter
// before signing.
type proofParts struct {
	header map[string]any
	claims map[string]any
}

func (k *testKey) parts(method, url, token string, iat time.Time, jti string) proofParts {
	jw := map[string]any{}
	for n, v := range k.jwk {
		jw[n] = v
	}
	p := proofParts{
		header: map[string]any{"typ": "dpop+jwt", "alg": k.alg, "jwk": jw},
		claims: map[string]any{"jti": jti, "htm": method, "htu": url, "iat": iat.Unix()},
	}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		p.claims["ath"] = b64(sum[:])
	}
	return p
}

// compact signs raw header and claims texts with k.
func (k *testKey) compact(header, claims []byte) string {
	in := b64(header) + "." + b64(claims)
	return in + "." + b64(k.sign([]byte(in)))
}

func (k *testKey) signParts(p proofParts) string {
	h, err := json.Marshal(p.header)
	if err != nil {
		panic(err)
	}
	c, err := json.Marshal(p.claims)
	if err != nil {
		panic(err)
	}
	return k.compact(h, c)
}

// proof is a valid proof for a GET of testURL with testToken.
func (k *testKey) proof(jti string) string {
	return k.signParts(k.parts("GET", testURL, testToken, testNow, jti))
}

func newStore(t testing.TB) *challenge.MemoryStore {
	t.Helper()
	s := challenge.NewMemoryStore(context.Background(), challenge.WithMemoryClock(func() time.Time { return testNow }))
	t.Cleanup(func() { s.Close() })
	return s
}

// offCurve is a P-256 x coordinate with a y that is not on the curve.
func offCurve() (string, string) {
	x := make([]byte, 32)
	x[31] = 1
	y := new(big.Int).SetInt64(2).FillBytes(make([]byte, 32))
	return b64(x), b64(y)
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func jwkParse(s string) (jwk.Key, error) { return jwk.ParseKey([]byte(s)) }
