package edge

// Which bearers and body carriers the edge reads as credentials: a
// foreign bearer, a body behind a BOM, VC 2.0 and case-folded VCs.

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// rt2Claims returns the decoded claims of a VC-JWT.
func rt2Claims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	pb, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(pb, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// rt2Sign signs header.payload (segments already encoded) as p, EdDSA.
func rt2Sign(p party, header, payload string) string {
	input := header + "." + payload
	sig := ed25519.Sign(p.priv.(ed25519.PrivateKey), []byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestForeignBearerReadAsVC: carrier.IsDelegation (edge/carrier) decodes a
// bearer's segments with strict base64url and reads them with a strict
// RFC 8259 walker. A bearer whose payload a JWT library reads as a VC-JWT
// ("vc" claim) but that the edge cannot decode is classified as someone
// else's OAuth token and, under the default non_delegation_bearer pass,
// forwarded upstream unverified next to the identity headers of the
// credential the edge did verify (§2.3: "Authorization, when it held a
// delegation" is removed).
//
//   - std base64 ('+' '/'): lestrrat-go/jwx (this module's own dependency)
//     guesses the alphabet per segment and decodes it; so do Node's
//     Buffer.from(s,'base64url') (panva/jose) and Python's
//     urlsafe_b64decode (PyJWT).
//   - UTF-8 BOM before the JSON: PyJWT (json.loads on bytes: utf-8-sig) and
//     jose (TextDecoder strips the BOM).
//   - NaN / Infinity: Python's json.loads accepts them.
//   - UTF-16: Python's json.loads(bytes) detects UTF-16/32.
//   - junk characters inside the segment: Python's b64decode(validate=False)
//     drops them.
//   - nesting deeper than 10000: V8's JSON.parse is iterative and reads it.
func TestForeignBearerReadAsVC(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	good := f.jwt(t, nil)

	// The smuggled credential: admin scope, signed by a key nobody trusts.
	mallory := newParty(t)
	evil := issueAs(t, mallory, f.template(func(tm *vc.Template) { tm.Scopes = []string{"admin:all"} }), nil)
	claims := rt2Claims(t, evil)
	claims["pad"] = "???>>>" // makes the std base64 of the payload hold '/' and '+'
	var payload []byte
	for pad := ""; ; pad += " " {
		// Whole base64 quanta, so that the std and url forms decode alike.
		claims["pad"] = "???>>>" + pad
		var err error
		if payload, err = json.Marshal(claims); err != nil {
			t.Fatal(err)
		}
		if len(payload)%3 == 0 {
			break
		}
	}
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","typ":"JWT","kid":"` + mallory.kid + `"}`))
	enc := base64.RawURLEncoding.EncodeToString

	utf16le := func(s string) []byte {
		var b []byte
		for _, u := range utf16.Encode([]rune(s)) {
			b = append(b, byte(u), byte(u>>8))
		}
		return b
	}
	withNaN := append(bytes.Clone(bytes.TrimSuffix(payload, []byte("}"))), []byte(`,"n":NaN}`)...)
	deep := append(bytes.Clone(bytes.TrimSuffix(payload, []byte("}"))), []byte(`,"d":`+strings.Repeat("[", 10001)+strings.Repeat("]", 10001)+`}`)...)
	junk := enc(payload)
	junk = junk[:8] + "!!!!" + junk[8:]

	stdPayload := base64.RawStdEncoding.EncodeToString(payload)
	if !strings.ContainsAny(stdPayload, "+/") {
		t.Fatal("test setup: std payload has no + or /")
	}

	cases := map[string]string{
		// Signed over the base64url form: jwx re-encodes the payload it
		// decoded to build the signing input, so it verifies this token.
		"std base64 payload": strings.Replace(rt2Sign(mallory, header, enc(payload)), enc(payload), stdPayload, 1),
		"BOM payload":        rt2Sign(mallory, header, enc(append([]byte("\xef\xbb\xbf"), payload...))),
		"NaN member":         rt2Sign(mallory, header, enc(withNaN)),
		"UTF-16 payload":     rt2Sign(mallory, header, enc(utf16le(string(payload)))),
		"junk in segment":    rt2Sign(mallory, header, junk),
		"nesting 10001":      rt2Sign(mallory, header, enc(deep)),
	}

	// jwx reads the std base64 one as a valid, signed VC-JWT with a vc claim.
	pub := mallory.priv.(ed25519.PrivateKey).Public()
	if _, err := jws.Verify([]byte(cases["std base64 payload"]), jws.WithKey(jwa.EdDSA, pub)); err != nil {
		t.Fatalf("jwx does not verify the std base64 token: %v", err)
	}
	msg, err := jws.Parse([]byte(cases["std base64 payload"]))
	if err != nil {
		t.Fatal(err)
	}
	var read map[string]json.RawMessage
	if err := json.Unmarshal(msg.Payload(), &read); err != nil || read["vc"] == nil {
		t.Fatalf("jwx reads no vc claim: %v %s", err, msg.Payload())
	}

	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			if carrier.IsDelegation(tok) {
				return // read as a delegation: verified (and refused) by the edge
			}
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Set("KYA-Delegation", good)
			r.Header.Set("Authorization", "Bearer "+tok)
			res := serve(t, h, r)
			if res.called && strings.Contains(res.fwd.Header.Get("Authorization"), tok) {
				t.Errorf("a bearer that JWT libraries read as a VC-JWT (vc claim, admin:all, untrusted issuer) was forwarded upstream unverified, next to the identity of the credential the edge verified")
			}
		})
	}
}

// TestBodyCarrierBehindBOM: without a tool policy, a body the edge's
// jsonscan finds invalid is neither scanned for carriers nor stripped
// (the carrier scan finds nothing). Python's json.loads(bytes) (Starlette's
// request.json(), so FastAPI and the Python MCP SDK) and Express's
// body-parser (iconv strips the BOM) read a BOM-prefixed body, and Python
// also reads NaN: the upstream gets params.delegationToken, a credential
// the edge never saw, alongside the Level 2 identity of the header
// credential the edge did verify. §2.3 says the body carriers are removed.
func TestBodyCarrierBehindBOM(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	good := f.jwt(t, nil)
	evil := issueAs(t, newParty(t), f.template(func(tm *vc.Template) { tm.Scopes = []string{"admin:all"} }), nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"delegationToken":"` + evil + `"}}`
	for name, b := range map[string]string{
		"BOM":      "\xef\xbb\xbf" + body,
		"NaN id":   strings.Replace(body, `"id":1`, `"id":NaN`, 1),
		"Infinity": strings.Replace(body, `"arguments":{}`, `"arguments":{"n":Infinity}`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			r := newRequest(http.MethodPost, "/mcp", b)
			r.Header.Set("KYA-Delegation", good)
			res := serve(t, h, r)
			if res.called && bytes.Contains(res.fwdBody, []byte(evil)) {
				t.Errorf("params.delegationToken forwarded unstripped and unverified (HTTP %d)", res.rec.Code)
			}
			if res.called || res.rec.Code != http.StatusBadRequest || !json.Valid(res.rec.Body.Bytes()) {
				t.Errorf("a JSON body the edge cannot read: called=%t HTTP %d %s, want a 400 with a JSON error", res.called, res.rec.Code, res.rec.Body)
			}
		})
	}
}

// TestVC20BearerNotRecognized: vc's parseJWS reads a payload with a
// top-level "@context" and "type" as a VC 2.0 credential "whatever the
// allowed typ says" (absent, "JWT"), and takes "vc+ld+jwt" for vc+jwt;
// carrier.IsDelegation (edge/carrier) recognizes only a vc/vp member or a typ of
// vc+jwt/vp+jwt. So a credential the edge itself verifies and admits in
// KYA-Delegation is, in Authorization, "someone else's token": under the
// default non_delegation_bearer pass it is never verified and goes to the
// upstream as is, a valid trusted credential the upstream can replay
// elsewhere (§2.3: the credential stays at the edge), or an untrusted one
// riding along with another carrier's identity.
func TestVC20BearerNotRecognized(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	good := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	claims := rt2Claims(t, f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"admin:all"} }))
	cred := claims["vc"].(map[string]any)
	delete(claims, "vc")
	for k, v := range cred {
		claims[k] = v // the VC 2.0 form: the payload is the credential
	}
	for _, typ := range []string{"", "JWT", "vc+ld+jwt"} {
		hdr := map[string]any{"alg": "EdDSA", "kid": f.user.kid}
		if typ != "" {
			hdr["typ"] = typ
		}
		tok := rt2Sign(f.user, b64json(t, hdr), b64json(t, claims))
		t.Run("typ "+typ, func(t *testing.T) {
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Set("KYA-Delegation", tok)
			if res := serve(t, h, r); !res.called {
				// The precondition of the attack: without it the test
				// would prove nothing, so it fails rather than skips.
				t.Fatalf("precondition: the edge does not admit this credential in KYA-Delegation: HTTP %d %s", res.rec.Code, res.rec.Body)
			}
			// Alone in Authorization it is "no credential" (401). Next to
			// another carrier's credential it rides along unverified.
			r = bearer(tok)
			r.Header.Set("KYA-Delegation", good)
			res := serve(t, h, r)
			if res.called && strings.Contains(res.fwd.Header.Get("Authorization"), tok) {
				t.Errorf("a credential the edge verifies in KYA-Delegation was, in Authorization, forwarded upstream unverified (isDelegationJWT = %v)", carrier.IsDelegation(tok))
			}
		})
	}
}

// TestBearerWithFoldedVCIsVerified: a bearer whose payload names its
// credential "VC" is read as one by encoding/json, so the edge verifies it
// (and refuses this unsigned one) instead of passing it upstream as someone
// else's token.
func TestBearerWithFoldedVCIsVerified(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	for _, payload := range []string{`{"iss":"did:key:z6Mkx","VC":{"type":["VerifiableCredential"]}}`, `{"Vp":{}}`} {
		res := serve(t, h, bearer(fakeJWT(`{"alg":"EdDSA","typ":"JWT"}`, payload)))
		if res.called || res.rec.Code != http.StatusUnauthorized {
			t.Errorf("payload %s: HTTP %d, forwarded %t; want 401, not forwarded", payload, res.rec.Code, res.called)
		}
	}
}

// fakeJWT builds an unsigned compact JWS.
func fakeJWT(header, payload string) string {
	e := base64.RawURLEncoding.EncodeToString
	return e([]byte(header)) + "." + e([]byte(payload)) + ".c2ln"
}
