package dpop_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
)

func checker(t testing.TB, opts ...dpop.Option) *dpop.Checker {
	return dpop.NewChecker(newStore(t), append([]dpop.Option{dpop.WithClock(func() time.Time { return testNow })}, opts...)...)
}

func TestCheckAccepts(t *testing.T) {
	for _, k := range []*testKey{newEdKey(t), newECKey(t)} {
		t.Run(k.alg, func(t *testing.T) {
			c := checker(t)
			p, err := c.Check(context.Background(), k.proof("j1"), dpop.Expect{Method: "GET", URL: testURL, AccessToken: testToken})
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			want, err := dpop.Thumbprint(p.Key)
			if err != nil || p.JKT != want || p.JTI != "j1" || p.Alg != k.alg || !p.IssuedAt.Equal(testNow) || p.Public == nil {
				t.Fatalf("proof = %+v (thumbprint %q, %v)", p, want, err)
			}
		})
	}
}

// TestThumbprintRFC7638 is the example of RFC 7638 §3.1.
func TestThumbprintRFC7638(t *testing.T) {
	k, err := jwkParse(`{"kty":"RSA","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw","e":"AQAB","alg":"RS256","kid":"2011-04-29"}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dpop.Thumbprint(k)
	if err != nil || got != "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs" {
		t.Fatalf("Thumbprint = %q, %v", got, err)
	}
}

func TestCheckTokenEndpointNeedsNoAth(t *testing.T) {
	k := newEdKey(t)
	proof := k.signParts(k.parts("POST", "https://edge.example/oauth/token", "", testNow, "j"))
	if _, err := checker(t).Check(context.Background(), proof, dpop.Expect{Method: "POST", URL: "https://edge.example/oauth/token"}); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func TestCheckRefuses(t *testing.T) {
	ed, ec := newEdKey(t), newECKey(t)
	other := newEdKey(t)
	want := dpop.Expect{Method: "GET", URL: testURL, AccessToken: testToken}
	alter := func(k *testKey, f func(p *proofParts)) string {
		p := k.parts("GET", testURL, testToken, testNow, "jti-1")
		f(&p)
		return k.signParts(p)
	}
	valid := ed.proof("jti-1")
	h, c, _ := strings.Cut(valid, ".")
	c, s, _ := strings.Cut(c, ".")
	offX, offY := offCurve()
	ed25519Identity := b64(append([]byte{1}, make([]byte, 31)...))
	cases := []struct {
		name  string
		proof string
		want  dpop.Expect
		err   error
	}{
		{"empty", "", want, dpop.ErrMissing},
		{"too large", strings.Repeat("a", dpop.MaxProofSize+1), want, dpop.ErrMalformed},
		{"two parts", h + "." + c, want, dpop.ErrMalformed},
		{"four parts", valid + ".x", want, dpop.ErrMalformed},
		{"padded header", h + "=." + c + "." + s, want, dpop.ErrMalformed},
		{"header not base64url", "*" + h[1:] + "." + c + "." + s, want, dpop.ErrMalformed},
		{"header not JSON", ed.compact([]byte("typ"), []byte(`{}`)), want, dpop.ErrMalformed},
		{"header an array", ed.compact([]byte(`[]`), []byte(`{}`)), want, dpop.ErrMalformed},
		{"header repeats alg", ed.compact([]byte(`{"typ":"dpop+jwt","alg":"none","alg":"EdDSA","jwk":`+jsonOf(ed.jwk)+`}`), []byte(`{"jti":"a","htm":"GET","htu":"`+testURL+`","iat":1800000000}`)), want, dpop.ErrMalformed},
		{"header case variant", ed.compact([]byte(`{"Typ":"dpop+jwt","alg":"EdDSA","jwk":`+jsonOf(ed.jwk)+`}`), []byte(`{"jti":"a","htm":"GET","htu":"`+testURL+`","iat":1800000000}`)), want, dpop.ErrMalformed},
		{"typ missing", alter(ed, func(p *proofParts) { delete(p.header, "typ") }), want, dpop.ErrMalformed},
		{"typ jwt", alter(ed, func(p *proofParts) { p.header["typ"] = "JWT" }), want, dpop.ErrMalformed},
		{"typ not a string", alter(ed, func(p *proofParts) { p.header["typ"] = 1 }), want, dpop.ErrMalformed},
		{"crit", alter(ed, func(p *proofParts) { p.header["crit"] = []string{"x"}; p.header["x"] = 1 }), want, dpop.ErrMalformed},
		{"b64 false", alter(ed, func(p *proofParts) { p.header["b64"] = false }), want, dpop.ErrMalformed},
		{"x5c", alter(ed, func(p *proofParts) { p.header["x5c"] = []string{"MIIB"} }), want, dpop.ErrMalformed},
		{"alg none", alter(ed, func(p *proofParts) { p.header["alg"] = "none" }), want, dpop.ErrAlg},
		{"alg HS256", alter(ed, func(p *proofParts) { p.header["alg"] = "HS256" }), want, dpop.ErrAlg},
		{"alg RS256", alter(ed, func(p *proofParts) { p.header["alg"] = "RS256" }), want, dpop.ErrAlg},
		{"alg missing", alter(ed, func(p *proofParts) { delete(p.header, "alg") }), want, dpop.ErrAlg},
		{"alg lower case", alter(ed, func(p *proofParts) { p.header["alg"] = "eddsa" }), want, dpop.ErrAlg},
		{"ES256 with an Ed25519 key", alter(ed, func(p *proofParts) { p.header["alg"] = "ES256" }), want, dpop.ErrAlg},
		{"EdDSA with a P-256 key", alter(ec, func(p *proofParts) { p.header["alg"] = "EdDSA" }), want, dpop.ErrAlg},
		{"jwk alg differs", alter(ed, func(p *proofParts) { p.header["jwk"].(map[string]any)["alg"] = "ES256" }), want, dpop.ErrAlg},
		{"jwk missing", alter(ed, func(p *proofParts) { delete(p.header, "jwk") }), want, dpop.ErrMalformed},
		{"jwk a string", alter(ed, func(p *proofParts) { p.header["jwk"] = "key" }), want, dpop.ErrMalformed},
		{"jwk private", alter(ed, func(p *proofParts) { p.header["jwk"].(map[string]any)["d"] = b64(ed.ed.Seed()) }), want, dpop.ErrMalformed},
		{"jwk symmetric", alter(ed, func(p *proofParts) { p.header["jwk"] = map[string]any{"kty": "oct", "k": "c2VjcmV0"} }), want, dpop.ErrMalformed},
		{"jwk RSA", alter(ed, func(p *proofParts) {
			p.header["jwk"] = map[string]any{"kty": "RSA", "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw", "e": "AQAB"}
		}), want, dpop.ErrAlg},
		{"jwk EC P-384", alter(ec, func(p *proofParts) {
			p.header["jwk"] = map[string]any{"kty": "EC", "crv": "P-384", "x": b64(make([]byte, 48)), "y": b64(make([]byte, 48))}
		}), want, dpop.ErrAlg},
		{"jwk off curve", alter(ec, func(p *proofParts) {
			p.header["jwk"] = map[string]any{"kty": "EC", "crv": "P-256", "x": offX, "y": offY}
		}), want, dpop.ErrMalformed},
		{"jwk small-order Ed25519", alter(ed, func(p *proofParts) { p.header["jwk"].(map[string]any)["x"] = ed25519Identity }), want, dpop.ErrMalformed},
		{"jwk repeats x", ed.compact([]byte(`{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"`+ed.jwk["x"].(string)+`","x":"`+other.jwk["x"].(string)+`"}}`), []byte(`{"jti":"a","htm":"GET","htu":"`+testURL+`","iat":1800000000}`)), want, dpop.ErrMalformed},
		{"signed by another key", other.compact([]byte(jsonOf(ed.parts("GET", testURL, testToken, testNow, "j").header)), []byte(jsonOf(ed.parts("GET", testURL, testToken, testNow, "j").claims))), want, dpop.ErrMalformed},
		{"signature empty", h + "." + c + ".", want, dpop.ErrMalformed},
		{"signature tampered", h + "." + c + "." + flip(s), want, dpop.ErrMalformed},
		{"claims altered after signing", h + "." + b64([]byte(`{"jti":"x","htm":"GET","htu":"`+testURL+`","iat":1800000000}`)) + "." + s, want, dpop.ErrMalformed},
		{"claims not JSON", ed.compact([]byte(jsonOf(ed.parts("GET", testURL, "", testNow, "j").header)), []byte(`{"jti":`)), want, dpop.ErrMalformed},
		{"claims repeat htu", ed.compact([]byte(jsonOf(ed.parts("GET", testURL, "", testNow, "j").header)), []byte(`{"jti":"a","htm":"GET","htu":"https://other.example/mcp","htu":"`+testURL+`","iat":1800000000}`)), want, dpop.ErrMalformed},
		{"claims case variant", ed.compact([]byte(jsonOf(ed.parts("GET", testURL, "", testNow, "j").header)), []byte(`{"jti":"a","HTM":"GET","htu":"`+testURL+`","iat":1800000000}`)), want, dpop.ErrMalformed},
		{"jti missing", alter(ed, func(p *proofParts) { delete(p.claims, "jti") }), want, dpop.ErrMalformed},
		{"jti empty", alter(ed, func(p *proofParts) { p.claims["jti"] = "" }), want, dpop.ErrMalformed},
		{"jti a number", alter(ed, func(p *proofParts) { p.claims["jti"] = 7 }), want, dpop.ErrMalformed},
		{"jti too long", alter(ed, func(p *proofParts) { p.claims["jti"] = strings.Repeat("j", 257) }), want, dpop.ErrMalformed},
		{"htm missing", alter(ed, func(p *proofParts) { delete(p.claims, "htm") }), want, dpop.ErrMalformed},
		{"htu missing", alter(ed, func(p *proofParts) { delete(p.claims, "htu") }), want, dpop.ErrMalformed},
		{"htu relative", alter(ed, func(p *proofParts) { p.claims["htu"] = "/mcp" }), want, dpop.ErrMalformed},
		{"htu not http", alter(ed, func(p *proofParts) { p.claims["htu"] = "ftp://edge.example/mcp" }), want, dpop.ErrMalformed},
		{"htu with user", alter(ed, func(p *proofParts) { p.claims["htu"] = "https://u@edge.example/mcp" }), want, dpop.ErrMalformed},
		{"iat missing", alter(ed, func(p *proofParts) { delete(p.claims, "iat") }), want, dpop.ErrMalformed},
		{"iat a string", alter(ed, func(p *proofParts) { p.claims["iat"] = "1800000000" }), want, dpop.ErrMalformed},
		{"iat negative", alter(ed, func(p *proofParts) { p.claims["iat"] = -1 }), want, dpop.ErrMalformed},
		{"iat huge", alter(ed, func(p *proofParts) { p.claims["iat"] = 1e300 }), want, dpop.ErrMalformed},
		{"ath a number", alter(ed, func(p *proofParts) { p.claims["ath"] = 1 }), want, dpop.ErrMalformed},
		{"too old", alter(ed, func(p *proofParts) { p.claims["iat"] = testNow.Add(-61 * time.Second).Unix() }), want, dpop.ErrStale},
		{"in the future", alter(ed, func(p *proofParts) { p.claims["iat"] = testNow.Add(6 * time.Second).Unix() }), want, dpop.ErrStale},
		{"htm another method", valid, dpop.Expect{Method: "POST", URL: testURL, AccessToken: testToken}, dpop.ErrMismatch},
		{"htm lower case", alter(ed, func(p *proofParts) { p.claims["htm"] = "get" }), want, dpop.ErrMismatch},
		{"htu another host", valid, dpop.Expect{Method: "GET", URL: "https://other.example/mcp", AccessToken: testToken}, dpop.ErrMismatch},
		{"htu another path", valid, dpop.Expect{Method: "GET", URL: "https://edge.example/mcp/x", AccessToken: testToken}, dpop.ErrMismatch},
		{"htu another scheme", valid, dpop.Expect{Method: "GET", URL: "http://edge.example/mcp", AccessToken: testToken}, dpop.ErrMismatch},
		{"htu another port", valid, dpop.Expect{Method: "GET", URL: "https://edge.example:8443/mcp", AccessToken: testToken}, dpop.ErrMismatch},
		{"htu trailing slash", valid, dpop.Expect{Method: "GET", URL: "https://edge.example/mcp/", AccessToken: testToken}, dpop.ErrMismatch},
		{"request URL unusable", valid, dpop.Expect{Method: "GET", URL: "/mcp", AccessToken: testToken}, dpop.ErrMismatch},
		{"ath missing", alter(ed, func(p *proofParts) { delete(p.claims, "ath") }), want, dpop.ErrMismatch},
		{"ath of another token", valid, dpop.Expect{Method: "GET", URL: testURL, AccessToken: testToken + "x"}, dpop.ErrMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := newStore(t)
			c := dpop.NewChecker(store, dpop.WithClock(func() time.Time { return testNow }))
			_, err := c.Check(context.Background(), tc.proof, tc.want)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Check = %v, want %v", err, tc.err)
			}
			if store.SingleUses() != 0 {
				t.Fatalf("a refused proof left %d markers in the store", store.SingleUses())
			}
			if tc.proof != "" && len(tc.proof) > 20 && strings.Contains(err.Error(), tc.proof[:20]) {
				t.Fatalf("error %q quotes the proof", err)
			}
		})
	}
}

func TestCheckHTUNormalised(t *testing.T) {
	k := newEdKey(t)
	for i, pair := range [][2]string{
		{"https://edge.example/mcp", "HTTPS://EDGE.example:443/mcp?x=1#f"},
		{"https://edge.example:443/mcp?ignored", "https://edge.example/mcp"},
		{"http://edge.example:80/a/%7euser/./b/../c", "http://Edge.Example/a/~user/c"},
		{"https://edge.example", "https://edge.example/"},
		{"https://[::1]:8443/mcp", "https://[::1]:8443/mcp"},
		{"https://edge.example/a%2fb", "https://edge.example/a%2Fb"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			proof := k.signParts(k.parts("GET", pair[0], "", testNow, "j"))
			if _, err := checker(t).Check(context.Background(), proof, dpop.Expect{Method: "GET", URL: pair[1]}); err != nil {
				t.Fatalf("htu %q for %q: %v", pair[0], pair[1], err)
			}
		})
	}
}

func TestCheckWindowEdges(t *testing.T) {
	k := newEdKey(t)
	c := checker(t, dpop.WithWindow(30*time.Second, 2*time.Second))
	for i, iat := range []time.Time{testNow.Add(-30 * time.Second), testNow.Add(2 * time.Second)} {
		p := k.signParts(k.parts("GET", testURL, "", iat, fmt.Sprint("j", i)))
		if _, err := c.Check(context.Background(), p, dpop.Expect{Method: "GET", URL: testURL}); err != nil {
			t.Fatalf("iat %v: %v", iat, err)
		}
	}
	p := k.signParts(k.parts("GET", testURL, "", testNow.Add(-31*time.Second), "late"))
	if _, err := c.Check(context.Background(), p, dpop.Expect{Method: "GET", URL: testURL}); !errors.Is(err, dpop.ErrStale) {
		t.Fatalf("31 s old: %v", err)
	}
}

func TestCheckReplay(t *testing.T) {
	store := newStore(t)
	c := dpop.NewChecker(store, dpop.WithClock(func() time.Time { return testNow }))
	k, other := newEdKey(t), newECKey(t)
	want := dpop.Expect{Method: "GET", URL: testURL, AccessToken: testToken}
	proof := k.proof("same")
	if _, err := c.Check(context.Background(), proof, want); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Check(context.Background(), proof, want); !errors.Is(err, dpop.ErrReplayed) {
		t.Fatalf("replayed proof: %v", err)
	}
	// Another proof by the same key with the same jti is a replay too.
	again := k.signParts(k.parts("GET", testURL, testToken, testNow.Add(-time.Second), "same"))
	if _, err := c.Check(context.Background(), again, want); !errors.Is(err, dpop.ErrReplayed) {
		t.Fatalf("jti reused: %v", err)
	}
	// Another key's jti is its own.
	if _, err := c.Check(context.Background(), other.proof("same"), want); err != nil {
		t.Fatalf("another key, same jti: %v", err)
	}
	// A second checker on the same store (another replica) refuses it too.
	c2 := dpop.NewChecker(store, dpop.WithClock(func() time.Time { return testNow }))
	if _, err := c2.Check(context.Background(), proof, want); !errors.Is(err, dpop.ErrReplayed) {
		t.Fatalf("replayed on a second checker: %v", err)
	}
}

type failingStore struct{ err error }

func (f failingStore) UseOnce(context.Context, [32]byte, time.Duration) error { return f.err }

func TestCheckStoreOutageFailsClosed(t *testing.T) {
	k := newEdKey(t)
	for _, err := range []error{challenge.ErrStoreUnavailable, challenge.ErrStoreFull, errors.New("boom")} {
		c := dpop.NewChecker(failingStore{err}, dpop.WithClock(func() time.Time { return testNow }))
		_, got := c.Check(context.Background(), k.proof("j"), dpop.Expect{Method: "GET", URL: testURL, AccessToken: testToken})
		if !errors.Is(got, challenge.ErrStoreUnavailable) || errors.Is(got, dpop.ErrReplayed) {
			t.Fatalf("store error %v: Check = %v", err, got)
		}
	}
}

func TestWithAlgs(t *testing.T) {
	c := checker(t, dpop.WithAlgs("ES256"))
	if got := c.Algs(); len(got) != 1 || got[0] != "ES256" {
		t.Fatalf("Algs = %v", got)
	}
	if _, err := c.Check(context.Background(), newEdKey(t).proof("j"), dpop.Expect{Method: "GET", URL: testURL, AccessToken: testToken}); !errors.Is(err, dpop.ErrAlg) {
		t.Fatalf("EdDSA with ES256 only: %v", err)
	}
	if got := checker(t).Algs(); strings.Join(got, " ") != "EdDSA ES256" {
		t.Fatalf("default Algs = %v", got)
	}
}

func TestProofHeader(t *testing.T) {
	cases := []struct {
		name   string
		values []string
		want   string
		err    error
	}{
		{"one", []string{" p.q.r "}, "p.q.r", nil},
		{"none", nil, "", dpop.ErrMissing},
		{"empty", []string{""}, "", dpop.ErrMissing},
		{"two", []string{"a.b.c", "d.e.f"}, "", dpop.ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tc.values {
				h.Add("Dpop", v)
			}
			got, err := dpop.ProofHeader(h)
			if got != tc.want || !errors.Is(err, tc.err) {
				t.Fatalf("ProofHeader = %q, %v", got, err)
			}
		})
	}
}

func TestNewProofIsAccepted(t *testing.T) {
	for _, k := range []*testKey{newEdKey(t), newECKey(t)} {
		var proof string
		var err error
		if k.ed != nil {
			proof, err = dpop.NewProof(k.ed, "POST", testURL+"?session=1", testToken, testNow)
		} else {
			proof, err = dpop.NewProof(k.ec, "POST", testURL+"?session=1", testToken, testNow)
		}
		if err != nil {
			t.Fatal(err)
		}
		c := checker(t)
		p, err := c.Check(context.Background(), proof, dpop.Expect{Method: "POST", URL: testURL, AccessToken: testToken})
		if err != nil {
			t.Fatalf("%s: %v", k.alg, err)
		}
		if p.Alg != k.alg {
			t.Fatalf("alg %q", p.Alg)
		}
	}
}

func flip(s string) string {
	b := []byte(s)
	if b[0] == 'A' {
		b[0] = 'B'
	} else {
		b[0] = 'A'
	}
	return string(b)
}
