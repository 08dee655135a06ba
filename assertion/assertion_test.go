package assertion

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

const (
	edgeDID  = "did:web:edge.example.com"
	upstream = "did:web:api.example.com"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }
func (c *clock) Now() time.Time   { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time)  { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func genEd25519() (crypto.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	return priv, err
}

func genP256() (crypto.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func mustKey(t testing.TB, gen func() (crypto.PrivateKey, error)) crypto.PrivateKey {
	t.Helper()
	k, err := gen()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testDelegation() *vc.Delegation {
	d := &vc.Delegation{
		AgentDID:     "did:key:z6MkfWfPAQKRKCbfntVqUYyo8Qbfu71WRV4zRpQ22CtBRHqc",
		UserDID:      "did:key:z6MkjsyStKSVg2GBBinMo3R2GCUMLWVGzUrbLVqHmZY62RXz",
		Issuer:       "did:key:z6MkjsyStKSVg2GBBinMo3R2GCUMLWVGzUrbLVqHmZY62RXz",
		Scopes:       []string{"greeting:read", "files:write"},
		ExpiresAt:    t0.Add(24 * time.Hour),
		ID:           "urn:uuid:del-root-agent",
		DelegationID: "del-root-agent",
		Format:       vc.FormatJWTVC11,
	}
	d.Hash = sha256.Sum256([]byte("the presented credential"))
	return d
}

func newTestSigner(t testing.TB, priv crypto.PrivateKey, c *clock, opts ...Option) *Signer {
	t.Helper()
	ks, err := NewKeySet(priv, c.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ks, edgeDID, append([]Option{WithClock(c.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// verifyWithJWKS verifies tok with jwx against a JWKS document at now.
func verifyWithJWKS(jwks []byte, tok string, now time.Time) (jwt.Token, error) {
	set, err := jwk.Parse(jwks)
	if err != nil {
		return nil, err
	}
	return jwt.Parse([]byte(tok),
		jwt.WithKeySet(set),
		jwt.WithValidate(true),
		jwt.WithClock(jwt.ClockFunc(func() time.Time { return now })),
		jwt.WithAudience(upstream),
		jwt.WithIssuer(edgeDID),
	)
}

func decodePart(t *testing.T, tok string, i int) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSignVerifiesAgainstJWKS(t *testing.T) {
	for _, tc := range []struct {
		name string
		gen  func() (crypto.PrivateKey, error)
		alg  string
	}{
		{"ed25519", genEd25519, "EdDSA"},
		{"p256", genP256, "ES256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock(t0)
			s := newTestSigner(t, mustKey(t, tc.gen), c, WithLifetime(90*time.Second))
			d := testDelegation()
			tok, err := s.Sign(d, upstream)
			if err != nil {
				t.Fatal(err)
			}
			jwks, err := s.JWKS(c.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := verifyWithJWKS(jwks, tok, t0.Add(time.Second)); err != nil {
				t.Fatalf("verify: %v", err)
			}

			kid := edgeDID + "#" + s.KeySet().Current().Thumbprint
			if got, want := decodePart(t, tok, 0), map[string]any{"alg": tc.alg, "kid": kid, "typ": Type}; !reflect.DeepEqual(got, want) {
				t.Errorf("header = %v, want %v", got, want)
			}
			claims := decodePart(t, tok, 1)
			jti, _ := claims["jti"].(string)
			if len(jti) < 16 {
				t.Errorf("jti %q too short", jti)
			}
			want := map[string]any{
				"iss":           edgeDID,
				"aud":           upstream,
				"iat":           float64(t0.Unix()),
				"exp":           float64(t0.Unix() + 90),
				"jti":           jti,
				"sub":           d.UserDID,
				"act":           map[string]any{"sub": d.AgentDID},
				"scope":         "greeting:read files:write",
				"delegation_id": "del-root-agent",
				"vc_hash":       "sha256:" + fmt.Sprintf("%x", d.Hash),
			}
			if !reflect.DeepEqual(claims, want) {
				t.Errorf("claims =\n%v\nwant\n%v", claims, want)
			}

			// The JWKS entry carries use, alg and the same kid.
			set, err := jwk.Parse(jwks)
			if err != nil {
				t.Fatal(err)
			}
			k, ok := set.LookupKeyID(kid)
			if !ok || set.Len() != 1 {
				t.Fatalf("JWKS lacks kid %s (len %d)", kid, set.Len())
			}
			if k.KeyUsage() != "sig" || k.Algorithm().String() != tc.alg {
				t.Errorf("JWKS key use=%q alg=%q", k.KeyUsage(), k.Algorithm())
			}
			if _, isPriv := k.(interface{ D() []byte }); isPriv {
				t.Error("JWKS leaks a private key")
			}
			if strings.Contains(string(jwks), `"d"`) {
				t.Error("JWKS contains a private component")
			}
		})
	}
}

func TestExpiryAndTampering(t *testing.T) {
	c := newClock(t0)
	s := newTestSigner(t, mustKey(t, genEd25519), c)
	tok, err := s.Sign(testDelegation(), upstream)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := s.JWKS(t0)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	var claims map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	claims["aud"] = "did:web:evil.example"
	forged, _ := json.Marshal(claims)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	sig[3] ^= 0x01
	hdr, _ := json.Marshal(map[string]any{"alg": "none", "typ": Type})

	for _, tc := range []struct {
		name string
		tok  string
		at   time.Time
		ok   bool
	}{
		{"ok", tok, t0.Add(59 * time.Second), true},
		{"expired", tok, t0.Add(61 * time.Second), false},
		{"payload", parts[0] + "." + base64.RawURLEncoding.EncodeToString(forged) + "." + parts[2], t0, false},
		{"signature", parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig), t0, false},
		{"alg-none", base64.RawURLEncoding.EncodeToString(hdr) + "." + parts[1] + ".", t0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := verifyWithJWKS(jwks, tc.tok, tc.at)
			if (err == nil) != tc.ok {
				t.Fatalf("verify err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestLifetimeBounds(t *testing.T) {
	ks, err := NewKeySet(mustKey(t, genEd25519), t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		life time.Duration
		ok   bool
	}{
		{0, false}, // explicit zero is not "default"
		{-time.Second, false},
		{time.Second, true},
		{300 * time.Second, true},
		{301 * time.Second, false},
		{time.Hour, false},
		{1500 * time.Millisecond, false},
	} {
		_, err := New(ks, edgeDID, WithLifetime(tc.life))
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrLifetime)) {
			t.Errorf("lifetime %v: err = %v, want ok=%v", tc.life, err, tc.ok)
		}
	}
	if s, err := New(ks, edgeDID); err != nil || s.Lifetime() != DefaultLifetime {
		t.Errorf("default lifetime: %v, %v", s, err)
	}
	short, err := NewKeySet(mustKey(t, genEd25519), t0, WithRetention(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(short, edgeDID); !errors.Is(err, ErrLifetime) {
		t.Errorf("retention shorter than lifetime: err = %v", err)
	}
	for _, bad := range []string{"", "edge.example.com", "did:web:x#frag"} {
		if _, err := New(ks, bad); err == nil {
			t.Errorf("edge DID %q accepted", bad)
		}
	}
}

func TestSignRejects(t *testing.T) {
	c := newClock(t0)
	s := newTestSigner(t, mustKey(t, genEd25519), c)
	mod := func(f func(*vc.Delegation)) *vc.Delegation { d := testDelegation(); f(d); return d }
	for _, tc := range []struct {
		name string
		d    *vc.Delegation
		aud  string
		want error
	}{
		{"nil", nil, upstream, ErrInvalidDelegation},
		{"no-agent", mod(func(d *vc.Delegation) { d.AgentDID = "" }), upstream, ErrInvalidDelegation},
		{"no-user", mod(func(d *vc.Delegation) { d.UserDID = "" }), upstream, ErrInvalidDelegation},
		{"no-hash", mod(func(d *vc.Delegation) { d.Hash = [32]byte{} }), upstream, ErrInvalidDelegation},
		{"space-in-scope", mod(func(d *vc.Delegation) { d.Scopes = []string{"a b"} }), upstream, ErrInvalidDelegation},
		{"no-audience", testDelegation(), "", ErrInvalidDelegation},
		{"expired", mod(func(d *vc.Delegation) { d.ExpiresAt = t0.Add(-time.Second) }), upstream, ErrDelegationExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := s.Sign(tc.d, tc.aud)
			if !errors.Is(err, tc.want) || tok != "" {
				t.Fatalf("Sign = %q, %v; want %v", tok, err, tc.want)
			}
		})
	}
}

func TestExpCappedByDelegation(t *testing.T) {
	c := newClock(t0)
	s := newTestSigner(t, mustKey(t, genEd25519), c)
	d := testDelegation()
	d.ExpiresAt = t0.Add(20 * time.Second)
	tok, err := s.Sign(d, upstream)
	if err != nil {
		t.Fatal(err)
	}
	claims := decodePart(t, tok, 1)
	if got := int64(claims["exp"].(float64)); got != t0.Unix()+20 {
		t.Fatalf("exp = %d, want %d (the delegation's expiry)", got, t0.Unix()+20)
	}
}

// TestExpWithinClockSkew: a delegation the verifier accepted inside its
// clock skew past its expiry gets an assertion (and a KYA-OS proof) that
// ends when the verifier stops accepting it; past the skew, none.
func TestExpWithinClockSkew(t *testing.T) {
	c := newClock(t0)
	s := newTestSigner(t, mustKey(t, genEd25519), c, WithClockSkew(time.Minute))
	d := testDelegation()
	d.ExpiresAt = t0.Add(-6 * time.Second)
	tok, err := s.Sign(d, upstream)
	if err != nil {
		t.Fatalf("Sign inside the skew: %v", err)
	}
	want := t0.Unix() + 54
	if got := int64(decodePart(t, tok, 1)["exp"].(float64)); got != want {
		t.Fatalf("exp = %d, want %d (the expiry plus the skew)", got, want)
	}
	// Reused while it states what the delegation allows.
	if again, err := s.Sign(d, upstream); err != nil || again != tok {
		t.Fatalf("second Sign = %v, reused %v", err, again == tok)
	}
	proof, err := s.SignKYAOSProof(d, "upstream.example", nil)
	if err != nil {
		t.Fatalf("SignKYAOSProof inside the skew: %v", err)
	}
	if got := int64(decodePart(t, proof, 1)["exp"].(float64)); got != want {
		t.Fatalf("proof exp = %d, want %d", got, want)
	}
	d.ExpiresAt = t0.Add(-time.Minute)
	if _, err := s.Sign(d, "https://other.example"); !errors.Is(err, ErrDelegationExpired) {
		t.Fatalf("Sign past the skew: %v, want ErrDelegationExpired", err)
	}
	if _, err := s.SignKYAOSProof(d, "upstream.example", nil); !errors.Is(err, ErrDelegationExpired) {
		t.Fatalf("SignKYAOSProof past the skew: %v, want ErrDelegationExpired", err)
	}
}

func TestRotationOverlap(t *testing.T) {
	c := newClock(t0)
	s := newTestSigner(t, mustKey(t, genEd25519), c)
	ks := s.KeySet()
	oldKid := ks.Current().KeyID(edgeDID)

	tokOld, err := s.Sign(testDelegation(), upstream)
	if err != nil {
		t.Fatal(err)
	}
	rotatedAt := t0.Add(10 * time.Second)
	c.Set(rotatedAt)
	if err := ks.Rotate(rotatedAt, mustKey(t, genP256)); err != nil {
		t.Fatal(err)
	}
	newKid := ks.Current().KeyID(edgeDID)
	if newKid == oldKid {
		t.Fatal("rotation kept the key")
	}

	// New assertions use the new key, even though a cached one exists.
	tokNew, err := s.Sign(testDelegation(), upstream)
	if err != nil {
		t.Fatal(err)
	}
	if tokNew == tokOld || decodePart(t, tokNew, 0)["kid"] != newKid {
		t.Fatalf("after rotation Sign used kid %v", decodePart(t, tokNew, 0)["kid"])
	}

	// Until the old assertion expires, the JWKS still verifies it.
	at := t0.Add(59 * time.Second)
	jwks, err := s.JWKS(at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifyWithJWKS(jwks, tokOld, at); err != nil {
		t.Fatalf("old assertion during overlap: %v", err)
	}
	if _, err := verifyWithJWKS(jwks, tokNew, at); err != nil {
		t.Fatalf("new assertion: %v", err)
	}
	if got := len(ks.Published(at)); got != 2 {
		t.Fatalf("published during overlap = %d keys, want 2", got)
	}

	// The old key stays published until retention ends, then leaves.
	last := rotatedAt.Add(DefaultRetention - time.Second)
	if got := len(ks.Published(last)); got != 2 {
		t.Fatalf("published just before retention end = %d keys, want 2", got)
	}
	gone := rotatedAt.Add(DefaultRetention)
	pub := ks.Published(gone)
	if len(pub) != 1 || pub[0].KeyID(edgeDID) != newKid {
		t.Fatalf("published after retention = %v", pub)
	}
	jwks, err = s.JWKS(gone)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(jwks), oldKid) {
		t.Fatal("retired key still in JWKS after retention")
	}
	// Even ignoring expiry, the old assertion no longer finds its key.
	set, _ := jwk.Parse(jwks)
	if _, err := jws.Verify([]byte(tokOld), jws.WithKeySet(set)); err == nil {
		t.Fatal("old assertion verified after its key left the JWKS")
	}
	if _, err := verifyWithJWKS(jwks, tokNew, t0.Add(69*time.Second)); err != nil {
		t.Fatalf("new assertion after pruning: %v", err)
	}

	// A later rotation drops the expired retired key from the set itself.
	if err := ks.Rotate(gone, mustKey(t, genEd25519)); err != nil {
		t.Fatal(err)
	}
	data, err := ks.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var stored keySetJSON
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Retired) != 1 {
		t.Fatalf("stored retired keys = %d, want 1 (expired one pruned)", len(stored.Retired))
	}
	// Rotating to the current key is a no-op.
	cur := ks.Current()
	if err := ks.Rotate(gone, cur.Signer); err != nil || len(ks.Published(gone)) != 2 {
		t.Fatalf("rotate to current: %v, %d published", err, len(ks.Published(gone)))
	}
}

func TestKeySetJSONRoundTrip(t *testing.T) {
	ks, err := NewKeySet(mustKey(t, genEd25519), t0, WithRetention(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.Rotate(t0.Add(time.Minute), mustKey(t, genP256)); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(ks)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKeySet(data)
	if err != nil {
		t.Fatal(err)
	}
	at := t0.Add(2 * time.Minute)
	a, b := ks.Published(at), back.Published(at)
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("published %d / %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Thumbprint != b[i].Thumbprint || a[i].Alg != b[i].Alg || !a[i].RetiredAt.Equal(b[i].RetiredAt) ||
			a[i].Retention != b[i].Retention || !a[i].CreatedAt.Equal(b[i].CreatedAt) {
			t.Errorf("key %d: %+v != %+v", i, a[i], b[i])
		}
		if !reflect.DeepEqual(a[i].Signer, b[i].Signer) || !reflect.DeepEqual(a[i].PublicKey, b[i].PublicKey) {
			t.Errorf("key %d: key differs after round trip", i)
		}
	}
	// Only the current key keeps (and stores) its private half.
	if a[0].Signer == nil || a[1].Signer != nil {
		t.Errorf("signers: current %v, retired %v", a[0].Signer != nil, a[1].Signer != nil)
	}
	var stored keySetJSON
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	var cur, ret map[string]any
	if json.Unmarshal(stored.Current.JWK, &cur) != nil || json.Unmarshal(stored.Retired[0].JWK, &ret) != nil {
		t.Fatal("stored JWKs unreadable")
	}
	if _, ok := cur["d"]; !ok {
		t.Error("current key stored without its private half")
	}
	if _, ok := ret["d"]; ok {
		t.Error("retired key stored with its private half")
	}
	if back.Retention() != 10*time.Minute {
		t.Errorf("retention = %v", back.Retention())
	}
	again, err := json.Marshal(back)
	if err != nil || string(again) != string(data) {
		t.Errorf("second encoding differs: %v", err)
	}
	for _, bad := range []string{``, `{}`, `{"version":2}`, `{"version":1,"current":{"jwk":{"kty":"oct","k":"AAAA"}}}`} {
		if _, err := ParseKeySet([]byte(bad)); !errors.Is(err, ErrInvalidKeySet) {
			t.Errorf("ParseKeySet(%q) err = %v", bad, err)
		}
	}
}

func TestParsePrivateKey(t *testing.T) {
	edPriv := mustKey(t, genEd25519).(ed25519.PrivateKey)
	ecPriv := mustKey(t, genP256).(*ecdsa.PrivateKey)
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8 := func(k any) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	ecDER, err := x509.MarshalECPrivateKey(ecPriv)
	if err != nil {
		t.Fatal(err)
	}
	jwkOf := func(k any) []byte {
		j, err := jwk.FromRaw(k)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(j)
		return b
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want crypto.PrivateKey
	}{
		{"ed25519-pkcs8", pkcs8(edPriv), edPriv},
		{"p256-pkcs8", pkcs8(ecPriv), ecPriv},
		{"p256-sec1", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER}), ecPriv},
		{"ed25519-jwk", jwkOf(edPriv), edPriv},
		{"p256-jwk", jwkOf(ecPriv), ecPriv},
		{"rsa-pkcs8", pkcs8(rsaPriv), nil},
		{"p384-pkcs8", pkcs8(p384), nil},
		{"rsa-jwk", jwkOf(rsaPriv), nil},
		{"public-jwk", jwkOf(edPriv.Public()), nil},
		{"garbage", []byte("hello"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePrivateKey(tc.in)
			if tc.want == nil {
				if !errors.Is(err, ErrUnsupportedKey) {
					t.Fatalf("err = %v, want ErrUnsupportedKey", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("key differs: %T", got)
			}
		})
	}
}

// dirStorage is a Storage over a folder of real files, with lock files
// created O_EXCL: two instances over one folder contend like two replicas.
type dirStorage struct{ dir string }

func (s dirStorage) path(key string) string { return filepath.Join(s.dir, filepath.FromSlash(key)) }

func (s dirStorage) Load(_ context.Context, key string) ([]byte, error) {
	return os.ReadFile(s.path(key))
}

func (s dirStorage) Store(_ context.Context, key string, value []byte) error {
	p := s.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(value); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}

func (s dirStorage) Exists(_ context.Context, key string) bool {
	_, err := os.Stat(s.path(key))
	return err == nil
}

func (s dirStorage) lockPath(name string) string { return filepath.Join(s.dir, "locks", name+".lock") }

func (s dirStorage) Lock(ctx context.Context, name string) error {
	if err := os.MkdirAll(filepath.Join(s.dir, "locks"), 0o700); err != nil {
		return err
	}
	for {
		f, err := os.OpenFile(s.lockPath(name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			return f.Close()
		}
		if !errors.Is(err, os.ErrExist) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (s dirStorage) Unlock(_ context.Context, name string) error { return os.Remove(s.lockPath(name)) }

func TestLoadOrCreateSharedStorage(t *testing.T) {
	dir := t.TempDir()
	stores := []Storage{dirStorage{dir}, dirStorage{dir}}
	var gens atomic.Int32
	gen := func() (crypto.PrivateKey, error) {
		gens.Add(1)
		time.Sleep(5 * time.Millisecond) // widen the race window
		return genEd25519()
	}
	const n = 8
	thumbs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			ks, err := LoadOrCreate(t.Context(), stores[i%2], "mcpi/edge_keys.json", gen)
			errs[i] = err
			if err == nil {
				thumbs[i] = ks.Current().Thumbprint
			}
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if thumbs[i] != thumbs[0] {
			t.Fatalf("replica %d key %s != %s", i, thumbs[i], thumbs[0])
		}
	}
	if g := gens.Load(); g != 1 {
		t.Fatalf("generated %d keys, want 1", g)
	}
	if _, err := os.Stat(filepath.Join(dir, "locks")); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "locks")); len(ents) != 0 {
		t.Fatalf("lock files left behind: %d", len(ents))
	}

	// A rotation through one replica's storage is seen by the other.
	rotAt := time.Now()
	rotated, err := RotateStored(t.Context(), stores[0], "mcpi/edge_keys.json", rotAt, genP256)
	if err != nil {
		t.Fatal(err)
	}
	other, err := LoadOrCreate(t.Context(), stores[1], "mcpi/edge_keys.json", func() (crypto.PrivateKey, error) {
		t.Error("generated a key although one is stored")
		return genEd25519()
	})
	if err != nil {
		t.Fatal(err)
	}
	pub := other.Published(rotAt)
	if other.Current().Thumbprint != rotated.Current().Thumbprint || len(pub) != 2 || pub[1].Thumbprint != thumbs[0] {
		t.Fatalf("other replica sees %d keys, current %s", len(pub), other.Current().Thumbprint)
	}

	// A corrupt stored set is an error, never overwritten.
	if err := stores[0].Store(t.Context(), "bad.json", []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(t.Context(), stores[1], "bad.json", genEd25519); !errors.Is(err, ErrInvalidKeySet) {
		t.Fatalf("corrupt set: err = %v", err)
	}
	if b, _ := stores[0].Load(t.Context(), "bad.json"); string(b) != "{" {
		t.Fatal("corrupt set was overwritten")
	}
	// A failing generator surfaces.
	boom := errors.New("no entropy")
	if _, err := LoadOrCreate(t.Context(), stores[0], "new.json", func() (crypto.PrivateKey, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("gen failure: err = %v", err)
	}
}

func TestReuseCache(t *testing.T) {
	c := newClock(t0)
	s := newTestSigner(t, mustKey(t, genEd25519), c) // 60 s lifetime
	d := testDelegation()
	first, err := s.Sign(d, upstream)
	if err != nil {
		t.Fatal(err)
	}
	c.Set(t0.Add(29*time.Second + 999*time.Millisecond))
	again, err := s.Sign(d, upstream)
	if err != nil || again != first {
		t.Fatalf("within half-life: new token (err %v)", err)
	}
	other, err := s.Sign(d, "did:web:other.example.com")
	if err != nil || other == first {
		t.Fatalf("other audience reused the token (err %v)", err)
	}
	d2 := testDelegation()
	d2.Hash[0] ^= 1
	if tok, err := s.Sign(d2, upstream); err != nil || tok == first {
		t.Fatalf("other credential reused the token (err %v)", err)
	}
	// One credential, another verdict (with or without the ancestors of a
	// KYA-OS-Delegation-Chain): the token states the first verdict, so it
	// is not reused for the second. On a signer of its own:
	// each variant replaces the credential's entry.
	for name, change := range map[string]func(*vc.Delegation){
		"user":       func(d *vc.Delegation) { d.UserDID = "did:key:z6MkOtherUser" },
		"agent":      func(d *vc.Delegation) { d.AgentDID = "did:key:z6MkOtherAgent" },
		"delegation": func(d *vc.Delegation) { d.DelegationID = "del-other" },
		"scopes":     func(d *vc.Delegation) { d.Scopes = []string{"greeting:read"} },
		"expiry":     func(d *vc.Delegation) { d.ExpiresAt = t0.Add(45 * time.Second) },
	} {
		sv := newTestSigner(t, mustKey(t, genEd25519), newClock(t0))
		first, err := sv.Sign(testDelegation(), upstream)
		if err != nil {
			t.Fatal(err)
		}
		dv := testDelegation()
		change(dv)
		tok, err := sv.Sign(dv, upstream)
		if err != nil || tok == first {
			t.Fatalf("%s differs: reused the token stating the other verdict (err %v)", name, err)
		}
		if name == "user" && decodePart(t, tok, 1)["sub"] != dv.UserDID {
			t.Fatalf("sub = %v, want %s", decodePart(t, tok, 1)["sub"], dv.UserDID)
		}
	}
	c.Set(t0.Add(30 * time.Second))
	fresh, err := s.Sign(d, upstream)
	if err != nil || fresh == first {
		t.Fatalf("at half-life: reused (err %v)", err)
	}
	if got := int64(decodePart(t, fresh, 1)["iat"].(float64)); got != t0.Unix()+30 {
		t.Fatalf("fresh iat = %d", got)
	}

	// Reuse off: every call signs anew.
	off := newTestSigner(t, mustKey(t, genEd25519), newClock(t0), WithReuse(false))
	a, _ := off.Sign(d, upstream)
	b, _ := off.Sign(d, upstream)
	if a == "" || a == b {
		t.Fatal("WithReuse(false) returned the same token")
	}

	// The cache is bounded.
	small := newTestSigner(t, mustKey(t, genEd25519), newClock(t0), WithReuseCacheSize(2))
	for i := range 5 {
		di := testDelegation()
		di.Hash[1] = byte(i)
		if _, err := small.Sign(di, upstream); err != nil {
			t.Fatal(err)
		}
	}
	if n := small.cache.len(); n != 2 {
		t.Fatalf("cache holds %d entries, want 2", n)
	}
	// The two newest are still served from the cache, the oldest is gone.
	d4 := testDelegation()
	d4.Hash[1] = 4
	t4a, _ := small.Sign(d4, upstream)
	t4b, _ := small.Sign(d4, upstream)
	if t4a != t4b {
		t.Fatal("newest entry evicted")
	}

	// Reloading the same key keeps the cache; a new key empties it.
	n := s.cache.len()
	if err := s.SetKeySet(s.KeySet()); err != nil || n == 0 || s.cache.len() != n {
		t.Fatalf("same-key reload: err %v, cache %d -> %d", err, n, s.cache.len())
	}
	if err := s.SetKeySet(new(KeySet)); !errors.Is(err, ErrUnsupportedKey) {
		t.Fatalf("empty key set accepted: %v", err)
	}
	ks2, err := NewKeySet(mustKey(t, genEd25519), t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetKeySet(ks2); err != nil {
		t.Fatal(err)
	}
	if n := s.cache.len(); n != 0 {
		t.Fatalf("cache holds %d entries after SetKeySet", n)
	}
}

func TestSignKYAOSProof(t *testing.T) {
	c := newClock(t0)
	s := newTestSigner(t, mustKey(t, genP256), c, WithLifetime(300*time.Second))
	d := testDelegation()
	for _, tc := range []struct {
		name  string
		chain []string
		want  []any
	}{
		{"default-chain", nil, []any{"del-root-agent"}},
		{"explicit-chain", []string{"del-root", "del-root-agent"}, []any{"del-root", "del-root-agent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := s.SignKYAOSProof(d, "api.example.com", tc.chain)
			if err != nil {
				t.Fatal(err)
			}
			jwks, err := s.JWKS(t0)
			if err != nil {
				t.Fatal(err)
			}
			set, _ := jwk.Parse(jwks)
			if _, err := jwt.Parse([]byte(tok), jwt.WithKeySet(set), jwt.WithValidate(true),
				jwt.WithClock(jwt.ClockFunc(func() time.Time { return t0 })), jwt.WithAudience("api.example.com")); err != nil {
				t.Fatalf("verify: %v", err)
			}
			if h := decodePart(t, tok, 0); h["typ"] != "JWT" || h["alg"] != "ES256" {
				t.Errorf("header %v", h)
			}
			claims := decodePart(t, tok, 1)
			want := map[string]any{
				"iss": edgeDID, "sub": d.UserDID, "aud": "api.example.com",
				"iat": float64(t0.Unix()), "exp": float64(t0.Unix() + 60), "jti": claims["jti"],
				"delegation_id": "del-root-agent", "delegation_chain": tc.want,
				"scope": "greeting:read,files:write",
			}
			if !reflect.DeepEqual(claims, want) {
				t.Errorf("claims =\n%v\nwant\n%v", claims, want)
			}
		})
	}
	bad := testDelegation()
	bad.Scopes = []string{"a,b"}
	if _, err := s.SignKYAOSProof(bad, "api.example.com", nil); !errors.Is(err, ErrInvalidDelegation) {
		t.Errorf("comma scope: err = %v", err)
	}
}

func TestDIDDocument(t *testing.T) {
	c := newClock(t0)
	s := newTestSigner(t, mustKey(t, genEd25519), c)
	if err := s.KeySet().Rotate(t0.Add(time.Second), mustKey(t, genP256)); err != nil {
		t.Fatal(err)
	}
	svc := Service{ID: edgeDID + "#mcp-i", Type: "mcp-i", ServiceEndpoint: "https://edge.example.com/.well-known/mcp-i.json"}
	raw, err := s.DIDDocument(t0.Add(2*time.Second), svc)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Context            []string `json:"@context"`
		ID                 string   `json:"id"`
		VerificationMethod []struct {
			ID, Type, Controller string
			PublicKeyJwk         map[string]any `json:"publicKeyJwk"`
		} `json:"verificationMethod"`
		AssertionMethod []string  `json:"assertionMethod"`
		Authentication  []string  `json:"authentication"`
		Service         []Service `json:"service"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.ID != edgeDID || len(doc.Context) != 2 {
		t.Errorf("id %q context %v", doc.ID, doc.Context)
	}
	jwks, _ := s.JWKS(t0.Add(2 * time.Second))
	set, _ := jwk.Parse(jwks)
	if len(doc.VerificationMethod) != 2 || set.Len() != 2 {
		t.Fatalf("%d methods, %d JWKS keys", len(doc.VerificationMethod), set.Len())
	}
	for i, vm := range doc.VerificationMethod {
		if vm.Type != "JsonWebKey2020" || vm.Controller != edgeDID || doc.AssertionMethod[i] != vm.ID || doc.Authentication[i] != vm.ID {
			t.Errorf("method %d: %+v", i, vm)
		}
		if _, ok := vm.PublicKeyJwk["d"]; ok {
			t.Errorf("method %d leaks the private key", i)
		}
		jk, ok := set.LookupKeyID(vm.ID)
		if !ok {
			t.Fatalf("method %s not in JWKS", vm.ID)
		}
		vk, err := jwk.ParseKey(mustJSON(t, vm.PublicKeyJwk))
		if err != nil {
			t.Fatal(err)
		}
		a, _ := jk.Thumbprint(crypto.SHA256)
		b, _ := vk.Thumbprint(crypto.SHA256)
		if string(a) != string(b) {
			t.Errorf("method %s key differs from JWKS", vm.ID)
		}
	}
	if len(doc.Service) != 1 || doc.Service[0].ID != svc.ID {
		t.Errorf("services %v", doc.Service)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConcurrentSignAndRotate(t *testing.T) {
	s := newTestSigner(t, mustKey(t, genEd25519), newClock(t0))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			d := testDelegation()
			d.Hash[0] = byte(i)
			for range 50 {
				if _, err := s.Sign(d, upstream); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			if err := s.KeySet().Rotate(t0, mustKey(t, genEd25519)); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if got := len(s.KeySet().Published(t0)); got != 6 {
		t.Fatalf("published %d keys, want 6", got)
	}
}

func BenchmarkSign(b *testing.B) {
	for _, bc := range []struct {
		name string
		gen  func() (crypto.PrivateKey, error)
	}{{"EdDSA", genEd25519}, {"ES256", genP256}} {
		b.Run(bc.name, func(b *testing.B) {
			s := newTestSigner(b, mustKey(b, bc.gen), newClock(t0), WithReuse(false))
			d := testDelegation()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Sign(d, upstream); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSignReuse(b *testing.B) {
	s := newTestSigner(b, mustKey(b, genEd25519), newClock(t0))
	d := testDelegation()
	if _, err := s.Sign(d, upstream); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign(d, upstream); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSignJWX is the same assertion signed through jwx's jwt/jws, the
// baseline the hand-built JWS in sign() is measured against.
func BenchmarkSignJWX(b *testing.B) {
	priv := mustKey(b, genEd25519)
	d := testDelegation()
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.KeyIDKey, edgeDID+"#x")
	_ = hdr.Set(jws.TypeKey, Type)
	b.ReportAllocs()
	for b.Loop() {
		tok := jwt.New()
		_ = tok.Set(jwt.IssuerKey, edgeDID)
		_ = tok.Set(jwt.AudienceKey, upstream)
		_ = tok.Set(jwt.IssuedAtKey, t0)
		_ = tok.Set(jwt.ExpirationKey, t0.Add(time.Minute))
		_ = tok.Set(jwt.JwtIDKey, newJTI())
		_ = tok.Set(jwt.SubjectKey, d.UserDID)
		_ = tok.Set("act", map[string]any{"sub": d.AgentDID})
		_ = tok.Set("scope", strings.Join(d.Scopes, " "))
		_ = tok.Set("delegation_id", d.DelegationID)
		_ = tok.Set("vc_hash", d.HashRef())
		if _, err := jwt.Sign(tok, jwt.WithKey(jwa.EdDSA, priv, jws.WithProtectedHeaders(hdr))); err != nil {
			b.Fatal(err)
		}
	}
}

// The published did:web document and keys work with this module's own DID
// resolver (what an upstream using didresolver would do), and keys written
// by didresolver.MarshalPrivateJWK load as edge keys.
func TestDidresolverInterop(t *testing.T) {
	priv, err := didresolver.GenerateKey(didresolver.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := didresolver.MarshalPrivateJWK(priv, "edge-1")
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := ParsePrivateKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(loaded, priv) {
		t.Fatal("didresolver JWK loaded as a different key")
	}
	c := newClock(t0)
	s := newTestSigner(t, loaded, c)
	if err := s.KeySet().Rotate(t0.Add(time.Second), mustKey(t, genP256)); err != nil {
		t.Fatal(err)
	}
	docJSON, err := s.DIDDocument(t0.Add(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := didresolver.ParseDocument(docJSON)
	if err != nil {
		t.Fatalf("didresolver rejects the document: %v", err)
	}
	for _, k := range s.KeySet().Published(t0.Add(2 * time.Second)) {
		for _, rel := range []didresolver.Relationship{didresolver.AssertionMethod, didresolver.Authentication} {
			got, err := doc.Key(k.KeyID(edgeDID), rel)
			if err != nil {
				t.Fatalf("%s under %s: %v", k.KeyID(edgeDID), rel, err)
			}
			if !reflect.DeepEqual(got.Public, k.PublicKey) {
				t.Fatalf("%s: resolved key differs", k.KeyID(edgeDID))
			}
		}
	}
}
