package vc

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// Tests of ErrRepeatedMember: JSON in which an object repeats a member
// name, at any depth, exactly or under Unicode case folding, is refused
// as malformed wherever this package reads it.

// insertAt inserts text into raw right after marker, which must occur
// exactly once (json.Marshal output: sorted members, no spaces); after "{"
// at offset 0 when marker is "".
func insertAt(t testing.TB, raw []byte, marker, text string) []byte {
	t.Helper()
	i := 1
	if marker != "" {
		if n := bytes.Count(raw, []byte(marker)); n != 1 {
			t.Fatalf("marker %s found %d times in %s", marker, n, raw)
		}
		i = bytes.Index(raw, []byte(marker)) + len(marker)
	}
	return append(append(append([]byte(nil), raw[:i]...), text...), raw[i:]...)
}

// mintRaw signs a compact JWS over a header and claims given as JSON text.
func mintRaw(t testing.TB, k testKey, hdr, claims []byte) []byte {
	t.Helper()
	input := b64(hdr) + "." + b64(claims)
	sig, err := signJWS(k.priv, []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(input + "." + b64(sig))
}

// firstMember returns the value of the first top-level member named name
// (exactly) in the JSON object raw, as a parser that keeps the first of a
// repeated member reads it.
func firstMember(t testing.TB, raw []byte, name string) json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if tok == name {
			return v
		}
	}
	return nil
}

func TestRepeatedMembers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	aud := ForAudience(serverDID)
	vpChecks := []CheckOption{aud, WithPresentationNonce(func(string, string) error { return nil })}

	jsonVC := func(t *testing.T) []byte { return signEd25519JCS(t, f.ed, f.jsonCredential(f.ed), false) }
	jcs2022VC := func(t *testing.T) []byte { return signEddsaJCS2022(t, f.ed, f.jsonCredential(f.ed), nil) }
	claims := func(t *testing.T) []byte { return mustJSON(t, f.vc11Claims(f.ed)) }
	hdr := func(t *testing.T) []byte { return mustJSON(t, header("EdDSA", f.ed.kid)) }
	vcJWT := func(h, c []byte) []byte { return mintRaw(t, f.ed, h, c) }
	leafJSON := signCred(t, f.ed, f.delegationVC(f.ed, f.agent.did, "d-1", "", "a"), false)
	jsonVP := func(t *testing.T) []byte {
		return signVPEd25519JCS(t, f.agent, jsonVP(t, f.agent, [][]byte{leafJSON}), vpProofOptions(f.agent))
	}
	// vpClaims are the claims of a VP-JWT carrying leafJSON, re-signed
	// by the agent once tweaked.
	vpClaims := func(t *testing.T) []byte {
		return b64Payload(t, vpJWT(t, f.agent, [][]byte{leafJSON}, nil))
	}
	agentHdr := mustJSON(t, header("EdDSA", f.agent.kid))
	vpJWT := func(c []byte) []byte { return mintRaw(t, f.agent, agentHdr, c) }

	tests := []struct {
		name   string
		raw    func(t *testing.T) []byte
		checks []CheckOption
		ok     bool // must verify; otherwise refused as a repeat
	}{
		{name: "JSON VC Ed25519Signature2020", raw: jsonVC, ok: true},
		{name: "JSON VC eddsa-jcs-2022", raw: jcs2022VC, ok: true},
		{name: "VC-JWT", raw: func(t *testing.T) []byte { return vcJWT(hdr(t), claims(t)) }, ok: true},
		{name: "JSON VP", raw: jsonVP, checks: vpChecks, ok: true},
		{name: "VP-JWT", raw: func(t *testing.T) []byte { return vpJWT(vpClaims(t)) }, checks: vpChecks, ok: true},

		// JSON credentials.
		{name: "JSON VC top-level exact repeat", raw: func(t *testing.T) []byte {
			return insertAt(t, jsonVC(t), "", `"issuer":"`+f.stranger.did+`",`)
		}},
		{name: "JSON VC credentialSubject and credentialsubject", raw: func(t *testing.T) []byte {
			return insertAt(t, jsonVC(t), "", `"credentialsubject":{"id":"`+f.stranger.did+`"},`)
		}},
		{name: "JSON VC repeat in credentialSubject", raw: func(t *testing.T) []byte {
			return insertAt(t, jsonVC(t), `"credentialSubject":{`, `"id":"`+f.stranger.did+`",`)
		}},
		{name: "JSON VC scopeſ beside scopes in the delegation", raw: func(t *testing.T) []byte {
			return insertAt(t, jsonVC(t), `"delegation":{`, `"scope\u017f":["admin"],`)
		}},
		{name: "JSON VC repeat in the constraints", raw: func(t *testing.T) []byte {
			return insertAt(t, jsonVC(t), `"constraints":{`, `"Audience":"did:web:other.example.com",`)
		}},
		{name: "JSON VC repeat in the proof", raw: func(t *testing.T) []byte {
			return insertAt(t, jsonVC(t), `"proof":{`, `"verificationMethod":"`+f.stranger.kid+`",`)
		}},
		{name: "JSON VC eddsa-jcs-2022 repeat in the proof", raw: func(t *testing.T) []byte {
			return insertAt(t, jcs2022VC(t), `"proof":{`, `"cryptosuite":"eddsa-rdfc-2022",`)
		}},

		// VC-JWT: the repeats are signed; the issuer vouches for bytes
		// that parsers read differently.
		{name: "VC-JWT claims top-level repeat", raw: func(t *testing.T) []byte {
			return vcJWT(hdr(t), insertAt(t, claims(t), "", `"sub":"`+f.stranger.did+`",`))
		}},
		{name: "VC-JWT repeat in credentialSubject", raw: func(t *testing.T) []byte {
			return vcJWT(hdr(t), insertAt(t, claims(t), `"credentialSubject":{`, `"ID":"`+f.stranger.did+`",`))
		}},
		{name: "VC-JWT repeat in the delegation scopes' object", raw: func(t *testing.T) []byte {
			return vcJWT(hdr(t), insertAt(t, claims(t), `"delegation":{`, `"scopes":["admin"],`))
		}},
		{name: "VC-JWT repeat in a skipped member", raw: func(t *testing.T) []byte {
			return vcJWT(hdr(t), insertAt(t, claims(t), "", `"x":[{"a":1,"A":2}],`))
		}},
		{name: "JWS header kid and Kelvin-sign kid", raw: func(t *testing.T) []byte {
			return vcJWT(insertAt(t, hdr(t), "", `"\u212aid":"`+f.stranger.kid+`",`), claims(t))
		}},
		{name: "JWS header alg repeated", raw: func(t *testing.T) []byte {
			return vcJWT(insertAt(t, hdr(t), "", `"alg":"ES256",`), claims(t))
		}},

		// Presentations.
		{name: "JSON VP holder repeated", raw: func(t *testing.T) []byte {
			return insertAt(t, jsonVP(t), "", `"holder":"`+f.stranger.did+`",`)
		}, checks: vpChecks},
		{name: "JSON VP repeat in an embedded credential", raw: func(t *testing.T) []byte {
			return insertAt(t, jsonVP(t), `"credentialSubject":{`, `"id":"`+f.stranger.did+`",`)
		}, checks: vpChecks},
		{name: "VP-JWT repeat in the vp claim", raw: func(t *testing.T) []byte {
			return vpJWT(insertAt(t, vpClaims(t), `"vp":{`, `"Type":["VerifiablePresentation"],`))
		}, checks: vpChecks},
		{name: "VP-JWT repeat in an embedded JSON credential", raw: func(t *testing.T) []byte {
			return vpJWT(insertAt(t, vpClaims(t), `"credentialSubject":{`, `"id":"`+f.stranger.did+`",`))
		}, checks: vpChecks},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw(t)
			checks := tc.checks
			if checks == nil {
				checks = []CheckOption{aud}
			}
			d, err := f.verifier().Verify(ctx, raw, checks...)
			if tc.ok {
				if err != nil || d == nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrRepeatedMember) || Reason(err) != "malformed" {
				t.Fatalf("err %v (reason %q), want ErrMalformed with ErrRepeatedMember, reason malformed", err, Reason(err))
			}
		})
	}
}

// TestRepeatedMembersAncestors: ancestors given with the credential and
// parents fetched by URL are read the same way.
func TestRepeatedMembersAncestors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	aud := ForAudience(serverDID)
	srv := newParentServer(t)
	ch := f.urlChain(t, nil)
	// The middle link (mid → mid2, scopes a and b) with a wider scope list
	// before its own: signed by mid, which is whom it vouches for.
	m := f.delegationVC(ch.mid, ch.mid2.did, "d-mid", credsURL("/c/root"), "a", "b")
	repeated := insertAt(t, signCred(t, ch.mid, m, false), `"delegation":{`, `"scopes":["a","b","c","admin"],`)
	srv.set("/c/root", served{body: ch.root})
	srv.set("/c/mid", served{body: ch.middle})
	v := f.verifier(WithTrustedIssuers(f.ed.did), srv.fetchOpt(nil))

	if _, err := v.Verify(ctx, ch.leaf, aud); err != nil {
		t.Fatalf("precondition: the chain with its parents fetched does not verify: %v", err)
	}
	for name, verify := range map[string]func() error{
		"given": func() error {
			_, err := v.Verify(ctx, ch.leaf, aud, WithAncestors(repeated, ch.root))
			return err
		},
		"fetched": func() error {
			srv.set("/c/mid", served{body: repeated})
			_, err := f.verifier(WithTrustedIssuers(f.ed.did), srv.fetchOpt(nil)).Verify(ctx, ch.leaf, aud)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := verify(); !errors.Is(err, ErrRepeatedMember) || Reason(err) != "malformed" {
				t.Fatalf("err %v (reason %q), want ErrRepeatedMember, reason malformed", err, Reason(err))
			}
		})
	}
}

// TestRepeatedMembersStatusList: a status list credential with its list
// given twice, an empty one before the signed one that revokes index 42,
// is not a list the credential can be checked against.
func TestRepeatedMembersStatusList(t *testing.T) {
	f := newFixture(t)
	srv := newStatusServer(t)
	list := signEd25519JCS(t, f.ed, listCred(t, f.ed, statusURL("/list"), "revocation", false, 42), false)
	srv.set("/list", list)
	srv.set("/repeated", insertAt(t, signEd25519JCS(t, f.ed, listCred(t, f.ed, statusURL("/repeated"), "revocation", false, 42), false),
		`"credentialSubject":{`, `"encodedList":"`+encodeList(t, 131072, false)+`",`))
	v := f.verifier(WithStatusLists(srv.client(), true))
	verify := func(path string) error {
		c := f.delegationVC(f.ed, f.agent.did, "d-s", "", "a")
		c["credentialStatus"] = statusEntryFor(statusURL(path), "revocation", false, "42")
		_, err := v.Verify(context.Background(), signCred(t, f.ed, c, false), ForAudience(serverDID))
		return err
	}
	if err := verify("/list"); !errors.Is(err, ErrRevoked) {
		t.Fatalf("precondition: the signed list does not revoke: %v", err)
	}
	if err := verify("/repeated"); !errors.Is(err, ErrStatusList) || !errors.Is(err, ErrRepeatedMember) || Reason(err) != "bad_status_list" {
		t.Fatalf("err %v (reason %q), want ErrStatusList with ErrRepeatedMember, reason bad_status_list", err, Reason(err))
	}
}

// TestRepeatedCredentialSubjectAttack: a JSON VC signed over its honest credentialSubject, with a second, wider one put
// before it. encoding/json keeps the last, so the signature verified over
// the honest reading while a parser keeping the first (an upstream's
// verify endpoint in proxy mode, another verifier of a chain) read the
// wider scopes. It must be refused.
func TestRepeatedCredentialSubjectAttack(t *testing.T) {
	f := newFixture(t)
	honest := f.delegationVC(f.ed, f.agent.did, "d-1", "", "greeting:read")
	signed := signEd25519JCS(t, f.ed, honest, false)
	wider := f.delegationVC(f.ed, f.agent.did, "d-1", "", "greeting:read", "admin:*")["credentialSubject"]
	forged := insertAt(t, signed, "", `"credentialSubject":`+string(mustJSON(t, wider))+",")

	// Preconditions: what made it an attack. The honest credential
	// verifies; in the forged one a first-wins parser reads the wider
	// subject, encoding/json the honest one, and the bytes the issuer
	// signed are what the JCS proof is checked over once encoding/json
	// has merged the two.
	v := f.verifier()
	if d, err := v.Verify(context.Background(), signed, ForAudience(serverDID)); err != nil || !equalStrings(d.Scopes, []string{"greeting:read"}) {
		t.Fatalf("precondition: the honest credential: %v", err)
	}
	if first := firstMember(t, forged, "credentialSubject"); !bytes.Contains(first, []byte("admin:*")) {
		t.Fatalf("precondition: a first-wins parser reads %s", first)
	}
	var merged map[string]json.RawMessage
	if err := json.Unmarshal(forged, &merged); err != nil || bytes.Contains(merged["credentialSubject"], []byte("admin:*")) {
		t.Fatalf("precondition: encoding/json reads %s (%v)", merged["credentialSubject"], err)
	}
	var proof struct {
		ProofValue string `json:"proofValue"`
	}
	if err := json.Unmarshal(merged["proof"], &proof); err != nil {
		t.Fatal(err)
	}
	delete(merged, "proof")
	msg, err := jcs.Transform(mustJSON(t, merged))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := decodeProofValue(proof.ProofValue, true)
	if err != nil || !ed25519.Verify(f.ed.pub.(ed25519.PublicKey), msg, sig) {
		t.Fatal("precondition: the signature does not cover the merged reading")
	}

	d, err := v.Verify(context.Background(), forged, ForAudience(serverDID))
	if err == nil {
		t.Fatalf("forged credential accepted, scopes %q", d.Scopes)
	}
	if !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrRepeatedMember) || Reason(err) != "malformed" {
		t.Fatalf("err %v (reason %q), want ErrMalformed with ErrRepeatedMember, reason malformed", err, Reason(err))
	}
	if strings.Contains(err.Error(), "admin") {
		t.Fatalf("error quotes the credential: %v", err)
	}
}

// TestRepeatedMembersIssuerDocument: an issuer whose DID document (here
// the JWK a did:jwk encodes, resolved without I/O) repeats a member name
// does not resolve; the edge fails closed.
func TestRepeatedMembersIssuerDocument(t *testing.T) {
	f := newFixture(t)
	k := newKey(t, didresolver.Ed25519)
	pj, err := didresolver.PublicJWK(k.pub)
	if err != nil {
		t.Fatal(err)
	}
	x := pj["x"].(string)
	verify := func(jwk string) error {
		iss := testKey{priv: k.priv, pub: k.pub, did: "did:jwk:" + b64([]byte(jwk))}
		iss.kid = iss.did + "#0"
		tok := mint(t, iss.priv, header("EdDSA", iss.kid), f.vc11Claims(iss))
		v := NewVerifier(didresolver.New(), WithClock(func() time.Time { return fixedNow }))
		_, err := v.Verify(context.Background(), tok, ForAudience(serverDID))
		return err
	}
	if err := verify(`{"crv":"Ed25519","kty":"OKP","x":"` + x + `"}`); err != nil {
		t.Fatalf("precondition: %v", err)
	}
	err = verify(`{"crv":"Ed25519","kty":"OKP","x":"` + x + `","X":"` + x + `"}`)
	if !errors.Is(err, ErrIssuerUnresolved) || !errors.Is(err, didresolver.ErrInvalidDID) || Reason(err) != "issuer_unresolved" {
		t.Fatalf("err %v (reason %q), want ErrIssuerUnresolved, reason issuer_unresolved", err, Reason(err))
	}
}
