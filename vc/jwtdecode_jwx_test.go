package vc

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/cputime"
)

// The hand-written decoder (jwtdecode.go) stands beside jwx, which the
// module already requires. These benchmarks price the two ways jwx could
// take its place, on the token BenchmarkParseJWT parses:
//   - BenchmarkParseJWTWithJWX: jwt.ParseInsecure, then the vc claim (a
//     map in jwx's token) brought into this package's credential;
//   - BenchmarkParseJWTWithJWS: jws.Parse for the envelope, then the
//     claims through encoding/json, as unmarshalObject decodes the rest.
// Compare them with BenchmarkParseJWT, and the difference with
// BenchmarkVerifyMissEdDSA (a fresh credential, the path the decoder is on)
// and BenchmarkVerifyCachedHit (where nothing is decoded).

func benchVCJWT(b *testing.B) []byte {
	issuer := newKey(b, didresolver.Ed25519)
	agent := newKey(b, didresolver.Ed25519)
	now := time.Now()
	tok, err := IssueJWT(issuer.priv, issuer.kid, Template{
		AgentDID: agent.did, UserDID: agent.did, Audience: []string{serverDID},
		Scopes: []string{"greet:execute"}, NotBefore: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour),
	})
	if err != nil {
		b.Fatal(err)
	}
	return []byte(tok)
}

func BenchmarkParseJWTWithJWX(b *testing.B) {
	raw := benchVCJWT(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		tok, err := jwt.ParseInsecure(raw)
		if err != nil {
			b.Fatal(err)
		}
		v, ok := tok.Get("vc")
		if !ok {
			b.Fatal("no vc claim")
		}
		js, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		var c credential
		if err := unmarshalObject(js, &c); err != nil || !c.Subject.set {
			b.Fatal(err)
		}
	}
	cputime.Report(b, cpu)
}

func BenchmarkParseJWTWithJWS(b *testing.B) {
	raw := benchVCJWT(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		msg, err := jws.Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		var jp jwtPayload
		if err := unmarshalObject(msg.Payload(), &jp); err != nil || jp.VC == nil {
			b.Fatal(err)
		}
	}
	cputime.Report(b, cpu)
}

// FuzzJWTDecodeMatchesJWX: on claims both this package's decoder and jwx
// accept, the registered claims read the same. Only exact member names
// are compared: this decoder also matches case-folded names, as
// encoding/json does (FuzzJWTDecodeMatchesJSON holds it to that), where
// jwx takes them for private claims.
func FuzzJWTDecodeMatchesJWX(f *testing.F) {
	fx := newFixture(f)
	f.Add(mustJSON(f, fx.vc11Claims(fx.ed)))
	f.Add(mustJSON(f, fx.vc20Payload(fx.ed)))
	for _, in := range jwtDecodeValid {
		if len(in) < 1000 {
			f.Add([]byte(in))
		}
	}
	f.Add([]byte(`{"iss":"did:key:z6Mk","sub":"a","aud":["x","y"],"exp":1700000000,"nbf":1.5,"iat":0,"jti":"j"}`))
	f.Add([]byte(`{"aud":"x","exp":1e9,"nbf":null}`))
	f.Fuzz(func(t *testing.T, claims []byte) {
		var jp jwtPayload
		if decodeJWTPayload(claims, &jp) != nil {
			return
		}
		hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA"}`))
		tok, err := jwt.ParseInsecure([]byte(hdr + "." + base64.RawURLEncoding.EncodeToString(claims) + ".AA"))
		if err != nil {
			return
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(claims, &members) != nil {
			t.Fatalf("decoded claims encoding/json refuses: %q", claims)
		}
		exact := func(name string) bool {
			for k := range members {
				if k != name && strings.EqualFold(k, name) {
					return false
				}
			}
			return true
		}
		str := func(name, ours, theirs string) {
			if exact(name) && ours != theirs {
				t.Errorf("%s: ours %q, jwx %q (claims %q)", name, ours, theirs, claims)
			}
		}
		str("iss", jp.Iss, tok.Issuer())
		str("sub", jp.Sub, tok.Subject())
		str("jti", jp.Jti, tok.JwtID())
		if exact("aud") && strings.Join(jp.Aud, "\x00") != strings.Join(tok.Audience(), "\x00") {
			t.Errorf("aud: ours %q, jwx %q (claims %q)", []string(jp.Aud), tok.Audience(), claims)
		}
		date := func(name string, ours numericDate, theirs time.Time) {
			if !exact(name) {
				return
			}
			if ours.set != !theirs.IsZero() || (ours.set && ours.t.Unix() != theirs.Unix()) {
				t.Errorf("%s: ours %v (set %t), jwx %v (claims %q)", name, ours.t, ours.set, theirs, claims)
			}
		}
		date("exp", jp.Exp, tok.Expiration())
		date("nbf", jp.Nbf, tok.NotBefore())
		date("iat", jp.Iat, tok.IssuedAt())
	})
}
