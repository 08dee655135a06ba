package vc

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// TestPresentation has one row per presentation outcome; presentations,
// credentials and keys are minted here.
func TestPresentation(t *testing.T) {
	f := newFixture(t)
	leafJWT := signCred(t, f.ed, f.delegationVC(f.ed, f.agent.did, "d-1", "", "a", "b"), true)
	leafJSON := signCred(t, f.ed, f.delegationVC(f.ed, f.agent.did, "d-2", "", "a"), false)
	ch := f.chain3(t, nil)
	stranger := f.addKey(t, didresolver.Ed25519)
	p256Agent := f.addKey(t, didresolver.P256)
	leafP256 := signCred(t, f.ed, f.delegationVC(f.ed, p256Agent.did, "d-3", "", "a"), false)

	// assertOnly's key is in its DID's assertionMethod but not in its
	// authentication: it may issue, not present.
	assertOnly := newKey(t, didresolver.Ed25519)
	{
		doc := document(t, assertOnly.did, []method{{assertOnly.kid, assertOnly.pub}}, nil)
		doc.Authentication = nil
		f.res[assertOnly.did] = doc
	}
	leafAssertOnly := signCred(t, f.ed, f.delegationVC(f.ed, assertOnly.did, "d-4", "", "a"), false)

	nonce := func() CheckOption { return WithPresentationNonce(nonceOnce()) }
	aud := ForAudience(serverDID)
	jsonProof := func(tweak func(vp, proof map[string]any)) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			vp, proof := jsonVP(t, f.agent, [][]byte{leafJSON}), vpProofOptions(f.agent)
			if tweak != nil {
				tweak(vp, proof)
			}
			return signVPEd25519JCS(t, f.agent, vp, proof)
		}
	}
	vpWith := func(creds [][]byte, tweak func(c map[string]any)) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return vpJWT(t, f.agent, creds, tweak) }
	}

	tests := []struct {
		name   string
		vp     func(t *testing.T) []byte
		opts   []Option
		checks []CheckOption
		want   error
		reason string
		chain  int // ok rows: the chain length expected
	}{
		{name: "ok VP-JWT EdDSA", vp: vpWith([][]byte{leafJWT}, nil), checks: []CheckOption{aud, nonce()}, chain: 1},
		{name: "ok VP-JWT with a JSON credential, no nonce check", vp: vpWith([][]byte{leafJSON}, nil), checks: []CheckOption{aud}, chain: 1},
		{name: "ok VP-JWT ES256 holder", vp: func(t *testing.T) []byte {
			return vpJWT(t, p256Agent, [][]byte{leafP256}, nil)
		}, checks: []CheckOption{aud, nonce()}, chain: 1},
		{name: "ok vp+jwt (VC 2.0) with an enveloped credential", vp: func(t *testing.T) []byte {
			h := header("EdDSA", f.agent.kid)
			h["typ"] = "vp+jwt"
			return mint(t, f.agent.priv, h, map[string]any{
				"@context": []any{"https://www.w3.org/ns/credentials/v2"},
				"type":     []any{"VerifiablePresentation"},
				"holder":   f.agent.did,
				"verifiableCredential": []any{map[string]any{
					"@context": []any{"https://www.w3.org/ns/credentials/v2"},
					"type":     "EnvelopedVerifiableCredential",
					"id":       "data:application/vc+jwt," + string(leafJWT),
				}},
				"aud": []any{serverDID}, "nonce": "n-1", "iat": fixedNow.Unix(),
			})
		}, checks: []CheckOption{aud, nonce()}, chain: 1},
		{name: "ok JSON VP Ed25519Signature2020", vp: jsonProof(nil), checks: []CheckOption{aud, nonce()}, chain: 1},
		{name: "ok JSON VP eddsa-jcs-2022", vp: func(t *testing.T) []byte {
			return signVPEddsaJCS2022(t, f.agent, jsonVP(t, f.agent, [][]byte{leafJWT}), vpProofOptions(f.agent))
		}, checks: []CheckOption{aud, nonce()}, chain: 1},
		{name: "ok chain of 3 in a VP", vp: vpWith([][]byte{ch.middle, ch.leaf, ch.root}, nil),
			opts: []Option{WithTrustedIssuers(f.ed.did)}, checks: []CheckOption{aud, nonce()}, chain: 3},
		{name: "ok chain of 3 in a JSON VP", vp: func(t *testing.T) []byte {
			return signVPEd25519JCS(t, f.agent, jsonVP(t, f.agent, [][]byte{ch.root, ch.middle, ch.leaf}), vpProofOptions(f.agent))
		}, opts: []Option{WithTrustedIssuers(f.ed.did)}, checks: []CheckOption{aud, nonce()}, chain: 3},
		{name: "ok VP with the ancestors in a separate carrier", vp: vpWith([][]byte{ch.leaf}, nil),
			opts: []Option{WithTrustedIssuers(f.ed.did)}, checks: []CheckOption{aud, WithAncestors(ch.root, ch.middle)}, chain: 3},
		{name: "ok VP without audience bound by its nonce", vp: vpWith([][]byte{leafJWT}, func(c map[string]any) { delete(c, "aud") }),
			checks: []CheckOption{aud, nonce()}, chain: 1},
		{name: "ok VP required and given", vp: vpWith([][]byte{leafJWT}, nil), checks: []CheckOption{aud, RequirePresentation()}, chain: 1},
		{name: "ok replay guard, first use", vp: vpWith([][]byte{leafJWT}, nil), opts: []Option{WithReplayGuard(&memGuard{})},
			checks: []CheckOption{aud}, chain: 1},

		{name: "presentation required", vp: func(*testing.T) []byte { return leafJWT },
			checks: []CheckOption{aud, RequirePresentation()}, want: ErrPresentationRequired, reason: "presentation_required"},
		{name: "wrong holder", vp: func(t *testing.T) []byte { return vpJWT(t, stranger, [][]byte{leafJWT}, nil) },
			checks: []CheckOption{aud}, want: ErrHolder, reason: "wrong_holder"},
		{name: "wrong holder in a chain", vp: func(t *testing.T) []byte {
			return vpJWT(t, ch.mid2, [][]byte{ch.root, ch.middle, ch.leaf}, nil)
		}, checks: []CheckOption{aud}, want: ErrHolder, reason: "wrong_holder"},
		{name: "iss and holder differ", vp: vpWith([][]byte{leafJWT}, func(c map[string]any) {
			c["vp"].(map[string]any)["holder"] = stranger.did
		}), checks: []CheckOption{aud}, want: ErrPresentation, reason: "bad_presentation"},
		{name: "no credentials", vp: vpWith(nil, nil), checks: []CheckOption{aud}, want: ErrPresentation, reason: "bad_presentation"},
		{name: "two leaves for the holder", vp: vpWith([][]byte{leafJWT, leafJSON}, nil), checks: []CheckOption{aud},
			want: ErrPresentation, reason: "bad_presentation"},
		{name: "nonce mismatch", vp: vpWith([][]byte{leafJWT}, func(c map[string]any) { c["nonce"] = "n-2" }),
			checks: []CheckOption{aud, nonce()}, want: ErrPresentation, reason: "bad_presentation"},
		{name: "nonce missing", vp: vpWith([][]byte{leafJWT}, func(c map[string]any) { delete(c, "nonce") }),
			checks: []CheckOption{aud, nonce()}, want: ErrPresentation, reason: "bad_presentation"},
		{name: "audience mismatch", vp: vpWith([][]byte{leafJWT}, func(c map[string]any) { c["aud"] = "did:web:other.example.com" }),
			checks: []CheckOption{aud, nonce()}, want: ErrAudience, reason: "wrong_audience"},
		{name: "no audience and no nonce check", vp: vpWith([][]byte{leafJWT}, func(c map[string]any) { delete(c, "aud") }),
			checks: []CheckOption{aud}, want: ErrAudience, reason: "wrong_audience"},
		{name: "no audience with RequireAudience", vp: vpWith([][]byte{leafJWT}, func(c map[string]any) { delete(c, "aud") }),
			checks: []CheckOption{aud, nonce(), RequireAudience()}, want: ErrAudience, reason: "wrong_audience"},
		{name: "JSON VP domain mismatch", vp: jsonProof(func(_, p map[string]any) { p["domain"] = "did:web:other.example.com" }),
			checks: []CheckOption{aud, nonce()}, want: ErrAudience, reason: "wrong_audience"},
		{name: "JSON VP challenge changed after signing", vp: func(t *testing.T) []byte {
			m := decodeJSON(t, jsonProof(nil)(t))
			setPath(m, "proof.challenge", "n-attacker")
			return mustJSON(t, m)
		}, checks: []CheckOption{aud, nonce()}, want: ErrSignature, reason: "bad_signature"},
		{name: "JSON VP signed like a credential (proof left out)", vp: func(t *testing.T) []byte {
			vp := jsonVP(t, f.agent, [][]byte{leafJSON})
			m := decodeJSON(t, signEd25519JCS(t, f.agent, vp, false))
			setPath(m, "proof.proofPurpose", "authentication")
			setPath(m, "proof.challenge", "n-1")
			setPath(m, "proof.domain", serverDID)
			return mustJSON(t, m)
		}, checks: []CheckOption{aud, nonce()}, want: ErrSignature, reason: "bad_signature"},
		{name: "JSON VP with a second proof in another case", vp: func(t *testing.T) []byte {
			m := decodeJSON(t, jsonProof(nil)(t))
			m["Proof"] = map[string]any{"type": "Ed25519Signature2020", "challenge": "other"}
			return mustJSON(t, m)
		}, checks: []CheckOption{aud, nonce()}, want: ErrMalformed, reason: "malformed"},
		{name: "JSON VP assertion purpose", vp: jsonProof(func(_, p map[string]any) { p["proofPurpose"] = "assertionMethod" }),
			checks: []CheckOption{aud, nonce()}, want: ErrPresentation, reason: "bad_presentation"},
		{name: "JSON VP without created", vp: jsonProof(func(_, p map[string]any) { delete(p, "created") }),
			checks: []CheckOption{aud, nonce()}, want: ErrPresentation, reason: "bad_presentation"},
		{name: "VP expired by exp", vp: vpWith([][]byte{leafJWT}, func(c map[string]any) {
			c["exp"] = fixedNow.Add(-2 * time.Minute).Unix()
		}), checks: []CheckOption{aud}, want: ErrExpired, reason: "expired"},
		{name: "VP older than its lifetime", vp: vpWith([][]byte{leafJWT}, func(c map[string]any) {
			c["iat"] = fixedNow.Add(-10 * time.Minute).Unix()
			c["exp"] = fixedNow.Add(time.Hour).Unix()
		}), checks: []CheckOption{aud}, want: ErrExpired, reason: "expired"},
		{name: "VP older than a shorter lifetime", vp: vpWith([][]byte{leafJWT}, nil), opts: []Option{WithPresentationLifetime(time.Second), WithClockSkew(0)},
			checks: []CheckOption{aud}, want: ErrExpired, reason: "expired"},
		{name: "VP issued in the future", vp: vpWith([][]byte{leafJWT}, func(c map[string]any) {
			c["iat"] = fixedNow.Add(10 * time.Minute).Unix()
		}), checks: []CheckOption{aud}, want: ErrNotYetValid, reason: "not_yet_valid"},
		{name: "VP without iat", vp: vpWith([][]byte{leafJWT}, func(c map[string]any) { delete(c, "iat") }),
			checks: []CheckOption{aud}, want: ErrPresentation, reason: "bad_presentation"},
		{name: "VP bad signature", vp: func(t *testing.T) []byte { return flipSignatureBit(t, vpJWT(t, f.agent, [][]byte{leafJWT}, nil)) },
			checks: []CheckOption{aud}, want: ErrSignature, reason: "bad_signature"},
		{name: "VP signed by another key", vp: func(t *testing.T) []byte {
			return mint(t, stranger.priv, header("EdDSA", f.agent.kid), decodeJSON(t, b64Payload(t, vpJWT(t, f.agent, [][]byte{leafJWT}, nil))))
		}, checks: []CheckOption{aud}, want: ErrSignature, reason: "bad_signature"},
		{name: "holder key not in authentication", vp: func(t *testing.T) []byte {
			return vpJWT(t, assertOnly, [][]byte{leafAssertOnly}, nil)
		}, checks: []CheckOption{aud}, want: ErrKeyNotAuthorized, reason: "key_not_authorized"},
		{name: "VP alg not allowed", vp: vpWith([][]byte{leafJWT}, nil), opts: []Option{WithAllowedAlgs(AlgES256)},
			checks: []CheckOption{aud}, want: ErrAlgorithm, reason: "unsupported_alg"},
		{name: "VP in a VP", vp: func(t *testing.T) []byte {
			inner := vpJWT(t, f.agent, [][]byte{leafJWT}, nil)
			return vpJWT(t, f.agent, [][]byte{inner}, nil)
		}, checks: []CheckOption{aud}, want: ErrMalformed, reason: "malformed"},
		{name: "leaf credential invalid inside a VP", vp: vpWith([][]byte{flipSignatureBit(t, leafJWT)}, nil),
			checks: []CheckOption{aud}, want: ErrSignature, reason: "bad_signature"},
		{name: "chain rule broken inside a VP", vp: func(t *testing.T) []byte {
			widened := f.delegationVC(ch.mid2, f.agent.did, "d-leaf", "d-mid", "a", "z")
			return vpJWT(t, f.agent, [][]byte{ch.root, ch.middle, signCred(t, ch.mid2, widened, true)}, nil)
		}, checks: []CheckOption{aud}, want: ErrChain, reason: "bad_chain"},
		{name: "replay guard store down fails closed", vp: vpWith([][]byte{leafJWT}, nil),
			opts: []Option{WithReplayGuard(&memGuard{err: errors.New("test: store down")})}, checks: []CheckOption{aud},
			want: ErrReplay, reason: "replayed"},
	}

	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.vp(t)
			d, err := f.verifier(tc.opts...).Verify(ctx, raw, tc.checks...)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if !d.Presented || d.Hash != sha256.Sum256(raw) || len(d.Chain) != tc.chain {
					t.Errorf("Presented %v, hash ok %v, chain %q", d.Presented, d.Hash == sha256.Sum256(raw), d.Chain)
				}
				return
			}
			expectRefusal(t, d, err, tc.want, tc.reason, "")
		})
	}
}

// b64Payload returns the decoded payload of a compact JWS.
func b64Payload(t *testing.T, tok []byte) []byte {
	t.Helper()
	parts := strings.Split(string(tok), ".")
	b, err := b64url.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPresentationReplay: a presentation is accepted once, by jti or, with
// none, by its signed bytes; the ttl is what is left of its lifetime.
func TestPresentationReplay(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	leaf := signCred(t, f.ed, f.delegationVC(f.ed, f.agent.did, "d-1", "", "a"), true)
	g := &memGuard{}
	v := f.verifier(WithReplayGuard(g))
	aud := ForAudience(serverDID)

	vp := vpJWT(t, f.agent, [][]byte{leaf}, nil)
	if _, err := v.Verify(ctx, vp, aud); err != nil {
		t.Fatal(err)
	}
	_, err := v.Verify(ctx, vp, aud)
	if !errors.Is(err, ErrReplay) || !errors.Is(err, errSeen) || Reason(err) != "replayed" {
		t.Fatalf("replay: err = %v", err)
	}
	// Same jti, signed again: still the same presentation id.
	again := vpJWT(t, f.agent, [][]byte{leaf}, func(c map[string]any) { c["nonce"] = "other" })
	if _, err := v.Verify(ctx, again, aud); !errors.Is(err, ErrReplay) {
		t.Fatalf("same jti: err = %v", err)
	}
	// Without jti, the signed bytes name it: whitespace around it does not
	// make it new.
	noJTI := vpJWT(t, f.agent, [][]byte{leaf}, func(c map[string]any) { delete(c, "jti") })
	if _, err := v.Verify(ctx, noJTI, aud); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, append([]byte(" "), noJTI...), aud); !errors.Is(err, ErrReplay) {
		t.Fatalf("no jti, replayed: err = %v", err)
	}
	jsonNoID := func(space string) []byte {
		m := jsonVP(t, f.agent, [][]byte{leaf})
		delete(m, "id")
		b := signVPEd25519JCS(t, f.agent, m, vpProofOptions(f.agent))
		return []byte(strings.Replace(string(b), ",", ","+space, 1))
	}
	if _, err := v.Verify(ctx, jsonNoID(""), aud); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, jsonNoID(" "), aud); !errors.Is(err, ErrReplay) {
		t.Fatalf("JSON VP re-serialized: err = %v", err)
	}
	// A presentation that fails another check does not burn its id.
	fresh := vpJWT(t, f.agent, [][]byte{leaf}, func(c map[string]any) { c["jti"] = "urn:uuid:vp-2" })
	if _, err := v.Verify(ctx, fresh, ForAudience("did:web:other.example.com")); !errors.Is(err, ErrAudience) {
		t.Fatalf("err = %v", err)
	}
	if _, err := v.Verify(ctx, fresh, aud); err != nil {
		t.Fatalf("after a failed attempt: %v", err)
	}
	// iat 1 minute ago, exp in 2 minutes, skew 60s: 3 minutes left.
	for id, ttl := range g.seen {
		if ttl != 3*time.Minute && ttl != 5*time.Minute {
			t.Errorf("ttl for %s = %v", id, ttl)
		}
		if !strings.HasPrefix(id, "vp:") || strings.Contains(id, "urn:uuid") {
			t.Errorf("replay id %q", id)
		}
	}
}

// TestPresentationNonceSideEffects: the caller's nonce check runs once,
// and only for a presentation that passed everything else.
func TestPresentationNonceSideEffects(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	leaf := signCred(t, f.ed, f.delegationVC(f.ed, f.agent.did, "d-1", "", "a"), true)
	calls := 0
	check := WithPresentationNonce(func(n, holder string) error {
		calls++
		if n != "n-1" {
			return errors.New("test: unknown nonce")
		}
		if holder != f.agent.did {
			return fmt.Errorf("test: holder %q, want the signing agent %q", holder, f.agent.did)
		}
		return nil
	})
	v := f.verifier()
	if _, err := v.Verify(ctx, flipSignatureBit(t, vpJWT(t, f.agent, [][]byte{leaf}, nil)), ForAudience(serverDID), check); !errors.Is(err, ErrSignature) {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, vpJWT(t, f.agent, [][]byte{leaf}, nil), ForAudience(serverDID), check, RequireScopes("zz")); !errors.Is(err, ErrMissingScope) {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("nonce checked %d times for failing presentations", calls)
	}
	d, err := v.Verify(ctx, vpJWT(t, f.agent, [][]byte{leaf}, nil), ForAudience(serverDID), check)
	if err != nil || calls != 1 || d.AgentDID != f.agent.did {
		t.Fatalf("err %v, calls %d", err, calls)
	}
	// A bare credential ignores the nonce option.
	if _, err := v.Verify(ctx, leaf, ForAudience(serverDID), check); err != nil || calls != 1 {
		t.Fatalf("bare credential: %v, calls %d", err, calls)
	}
}

// TestPresentationDelegation checks the result of a presented chain.
func TestPresentationDelegation(t *testing.T) {
	f := newFixture(t)
	ch := f.chain3(t, nil)
	raw := vpJWT(t, f.agent, [][]byte{ch.root, ch.middle, ch.leaf}, nil)
	d, err := f.verifier().Verify(context.Background(), raw, ForAudience(serverDID), RequireScopes("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(d)
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["presented"] != true || len(got["chain"].([]any)) != 3 {
		t.Errorf("JSON = %s", b)
	}
	if d.Issuer != ch.mid2.did || d.UserDID != f.ed.did || d.Format != FormatJWTVC11 {
		t.Errorf("issuer %q user %q format %q", d.Issuer, d.UserDID, d.Format)
	}
}
