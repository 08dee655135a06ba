package vc

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestVerify has one row per outcome; every credential is minted here.
func TestVerify(t *testing.T) {
	f := newFixture(t)
	aud := ForAudience(serverDID)
	signed := func(k testKey, tweak func(c map[string]any)) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			c := f.vc11Claims(k)
			if tweak != nil {
				tweak(c)
			}
			return mint(t, k.priv, header(algOf(t, k), k.kid), c)
		}
	}
	withHeader := func(tweak func(h map[string]any)) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			h := header("EdDSA", f.ed.kid)
			tweak(h)
			return mint(t, f.ed.priv, h, f.vc11Claims(f.ed))
		}
	}
	jsonVC := f.signedJSON
	ed25519JCS := func(multibase bool) func(t *testing.T, c map[string]any) []byte {
		return func(t *testing.T, c map[string]any) []byte { return signEd25519JCS(t, f.ed, c, multibase) }
	}
	eddsaJCS := func(proofContext []any) func(t *testing.T, c map[string]any) []byte {
		return func(t *testing.T, c map[string]any) []byte { return signEddsaJCS2022(t, f.ed, c, proofContext) }
	}
	vc1 := "https://www.w3.org/2018/credentials/v1"

	tests := []struct {
		name   string
		token  func(t *testing.T) []byte
		opts   []Option
		checks []CheckOption
		want   error // nil: must verify
		reason string
		format Format
	}{
		{name: "ok EdDSA VC 1.1", token: signed(f.ed, nil), checks: []CheckOption{aud}, format: FormatJWTVC11},
		{name: "ok ES256 VC 1.1", token: signed(f.p256, nil), checks: []CheckOption{aud}, format: FormatJWTVC11},
		{name: "ok ES256K VC 1.1", token: signed(f.k1, nil), checks: []CheckOption{aud}, format: FormatJWTVC11},
		{name: "ok VC 2.0 vc+jwt", token: func(t *testing.T) []byte {
			h := header("ES256", f.p256.kid)
			h["typ"] = "vc+jwt"
			return mint(t, f.p256.priv, h, f.vc20Payload(f.p256))
		}, checks: []CheckOption{aud}, format: FormatJWTVC20},
		{name: "ok JSON Ed25519Signature2020 base64url", token: jsonVC(nil, ed25519JCS(false)), checks: []CheckOption{aud}, format: FormatEd25519JCS},
		{name: "ok JSON Ed25519Signature2020 multibase", token: jsonVC(nil, ed25519JCS(true)), checks: []CheckOption{aud}, format: FormatEd25519JCS},
		{name: "ok eddsa-jcs-2022", token: jsonVC(nil, eddsaJCS(nil)), checks: []CheckOption{aud}, format: FormatEddsaJCS2022},
		{name: "ok eddsa-jcs-2022 proof with the same @context", token: func(t *testing.T) []byte {
			c := f.jsonCredential(f.ed)
			return signEddsaJCS2022(t, f.ed, c, c["@context"].([]any))
		}, checks: []CheckOption{aud}, format: FormatEddsaJCS2022},
		{name: "ok eddsa-jcs-2022 proof @context a strict prefix", token: jsonVC(nil, eddsaJCS([]any{vc1})),
			checks: []CheckOption{aud}, format: FormatEddsaJCS2022},
		{name: "ok no kid, one assertion key", token: func(t *testing.T) []byte {
			return mint(t, f.ed.priv, header("EdDSA", ""), f.vc11Claims(f.ed))
		}, checks: []CheckOption{aud}, format: FormatJWTVC11},
		{name: "ok relative kid", token: func(t *testing.T) []byte {
			_, frag, _ := strings.Cut(f.ed.kid, "#")
			return mint(t, f.ed.priv, header("EdDSA", "#"+frag), f.vc11Claims(f.ed))
		}, checks: []CheckOption{aud}, format: FormatJWTVC11},
		{name: "ok within skew", token: signed(f.ed, func(c map[string]any) {
			c["exp"] = fixedNow.Add(-30 * time.Second).Unix()
			c["nbf"] = fixedNow.Add(30 * time.Second).Unix()
			setPath(c, "vc.expirationDate", del)
		}), checks: []CheckOption{aud}, format: FormatJWTVC11},
		{name: "ok credential without audience", token: signed(f.ed, func(c map[string]any) {
			setPath(c, "vc.credentialSubject.delegation.constraints.audience", del)
		}), format: FormatJWTVC11},
		{name: "ok trusted issuer", token: signed(f.ed, nil), opts: []Option{WithTrustedIssuers(f.p256.did, f.ed.did)},
			checks: []CheckOption{aud}, format: FormatJWTVC11},
		{name: "ok required scopes", token: signed(f.ed, nil),
			checks: []CheckOption{aud, RequireScopes("greeting:write", "greeting:read")}, format: FormatJWTVC11},

		{name: "too large", token: signed(f.ed, nil), opts: []Option{WithMaxSize(100)}, want: ErrTooLarge, reason: "too_large"},
		{name: "too large default", token: func(*testing.T) []byte { return bytes.Repeat([]byte("a"), 64<<10+1) },
			want: ErrTooLarge, reason: "too_large"},
		{name: "empty", token: func(*testing.T) []byte { return nil }, want: ErrMalformed, reason: "malformed"},
		{name: "whitespace only", token: func(*testing.T) []byte { return []byte(" \r\n\t") }, want: ErrMalformed, reason: "malformed"},
		{name: "garbage", token: func(*testing.T) []byte { return []byte("not a credential") }, want: ErrMalformed, reason: "malformed"},
		{name: "two segments", token: func(*testing.T) []byte { return []byte("eyJhbGciOiJFZERTQSJ9.e30") }, want: ErrMalformed, reason: "malformed"},
		{name: "four segments", token: func(t *testing.T) []byte { return append(signed(f.ed, nil)(t), ".x"...) }, want: ErrMalformed, reason: "malformed"},
		{name: "JSON not an object", token: func(*testing.T) []byte { return []byte("{]") }, want: ErrMalformed, reason: "malformed"},
		{name: "JWT that is not a VC", token: func(t *testing.T) []byte {
			return mint(t, f.ed.priv, header("EdDSA", f.ed.kid), map[string]any{"iss": f.ed.did, "sub": "u", "scope": "a b"})
		}, want: ErrUnsupportedFormat, reason: "unsupported_format"},
		{name: "OAuth RS256 token with odd claims is not ours", token: func(t *testing.T) []byte {
			return mint(t, nil, map[string]any{"alg": "RS256", "typ": "at+jwt"}, map[string]any{"exp": "tomorrow", "aud": 5})
		}, want: ErrUnsupportedFormat, reason: "unsupported_format"},
		{name: "VP-JWT without type or credentials", token: func(t *testing.T) []byte {
			return mint(t, f.agent.priv, header("EdDSA", f.agent.kid), map[string]any{"iss": f.agent.did, "vp": map[string]any{}})
		}, want: ErrPresentation, reason: "bad_presentation"},
		{name: "vc+jwt that is not a VC", token: func(t *testing.T) []byte {
			h := header("EdDSA", f.ed.kid)
			h["typ"] = "vc+jwt"
			return mint(t, f.ed.priv, h, map[string]any{"iss": f.ed.did})
		}, want: ErrMalformed, reason: "malformed"},
		{name: "vc claim not an object", token: signed(f.ed, func(c map[string]any) { c["vc"] = "x" }), want: ErrMalformed, reason: "malformed"},
		{name: "crit header", token: withHeader(func(h map[string]any) { h["crit"] = []any{"exp"}; h["exp"] = 1 }),
			want: ErrMalformed, reason: "malformed"},
		{name: "b64 false", token: withHeader(func(h map[string]any) { h["b64"] = false }), want: ErrMalformed, reason: "malformed"},
		{name: "jwk header", token: withHeader(func(h map[string]any) { h["jwk"] = map[string]any{"kty": "OKP"} }), want: ErrMalformed, reason: "malformed"},
		{name: "jku header", token: withHeader(func(h map[string]any) { h["jku"] = "https://evil.example/jwks" }), want: ErrMalformed, reason: "malformed"},
		{name: "wrong typ", token: withHeader(func(h map[string]any) { h["typ"] = "at+jwt" }), want: ErrMalformed, reason: "malformed"},
		{name: "iss and vc.issuer differ", token: signed(f.ed, func(c map[string]any) { setPath(c, "vc.issuer", f.p256.did) }),
			want: ErrMalformed, reason: "malformed"},
		{name: "sub and credentialSubject.id differ", token: signed(f.ed, func(c map[string]any) { c["sub"] = f.p256.did }),
			want: ErrMalformed, reason: "malformed"},
		{name: "jti and vc.id differ", token: signed(f.ed, func(c map[string]any) { c["jti"] = "urn:uuid:other" }),
			want: ErrMalformed, reason: "malformed"},
		{name: "exp not a number", token: signed(f.ed, func(c map[string]any) { c["exp"] = "soon" }), want: ErrMalformed, reason: "malformed"},
		{name: "bad issuanceDate", token: signed(f.ed, func(c map[string]any) { setPath(c, "vc.issuanceDate", "yesterday") }),
			want: ErrMalformed, reason: "malformed"},

		{name: "alg none", token: func(t *testing.T) []byte {
			return mint(t, nil, header("none", f.ed.kid), f.vc11Claims(f.ed))
		}, want: ErrAlgorithm, reason: "unsupported_alg"},
		{name: "HS256", token: func(t *testing.T) []byte {
			tok := mint(t, nil, header("HS256", f.ed.kid), f.vc11Claims(f.ed))
			input := tok[:bytes.LastIndexByte(tok, '.')]
			mac := hmac.New(sha256.New, []byte(f.ed.kid)) // key confusion: a public value as HMAC secret
			mac.Write(input)
			return append(append(input, '.'), b64(mac.Sum(nil))...)
		}, want: ErrAlgorithm, reason: "unsupported_alg"},
		{name: "RS256", token: func(t *testing.T) []byte {
			tok := mint(t, nil, header("RS256", f.ed.kid), f.vc11Claims(f.ed))
			sig := make([]byte, 256)
			_, _ = rand.Read(sig)
			return append(tok, b64(sig)...)
		}, want: ErrAlgorithm, reason: "unsupported_alg"},
		{name: "alg does not fit key", token: func(t *testing.T) []byte {
			// Header says ES256, the issuer's key is Ed25519 (signed with a
			// P-256 key so the signature itself is well formed).
			return mint(t, f.p256.priv, header("ES256", f.ed.kid), f.vc11Claims(f.ed))
		}, want: ErrAlgorithm, reason: "unsupported_alg"},
		{name: "alg not allowed", token: signed(f.ed, nil), opts: []Option{WithAllowedAlgs("ES256", "RS256")},
			want: ErrAlgorithm, reason: "unsupported_alg"},
		{name: "JSON proof when EdDSA not allowed", token: jsonVC(nil, ed25519JCS(false)), opts: []Option{WithAllowedAlgs("ES256K")},
			want: ErrAlgorithm, reason: "unsupported_alg"},
		{name: "eddsa-jcs-2022 with a non-Ed25519 key", token: func(t *testing.T) []byte {
			c := f.jsonCredential(f.p256)
			b := signEddsaJCS2022(t, f.ed, c, nil)
			m := decodeJSON(t, b)
			setPath(m, "proof.verificationMethod", f.p256.kid)
			return mustJSON(t, m)
		}, want: ErrAlgorithm, reason: "unsupported_alg"},

		{name: "issuer unresolved", token: signed(f.unresolvable, nil), want: ErrIssuerUnresolved, reason: "issuer_unresolved"},
		{name: "unknown kid", token: func(t *testing.T) []byte {
			return mint(t, f.ed.priv, header("EdDSA", f.ed.did+"#nope"), f.vc11Claims(f.ed))
		}, want: ErrUnknownKey, reason: "unknown_key"},
		{name: "kid of another DID", token: func(t *testing.T) []byte {
			return mint(t, f.p256.priv, header("ES256", f.p256.kid), f.vc11Claims(f.ed))
		}, want: ErrUnknownKey, reason: "unknown_key"},
		{name: "no kid, two assertion keys", token: func(t *testing.T) []byte {
			return mint(t, f.multi.priv, header("EdDSA", ""), f.vc11Claims(f.multi))
		}, want: ErrUnknownKey, reason: "unknown_key"},
		{name: "key not in assertionMethod", token: func(t *testing.T) []byte {
			return mint(t, f.authOnly.priv, header("EdDSA", f.authOnly.kid), f.vc11Claims(f.ed))
		}, want: ErrKeyNotAuthorized, reason: "key_not_authorized"},

		{name: "bad signature", token: func(t *testing.T) []byte {
			return flipSignatureBit(t, signed(f.ed, nil)(t))
		}, want: ErrSignature, reason: "bad_signature"},
		{name: "tampered payload", token: func(t *testing.T) []byte {
			tok := string(signed(f.ed, nil)(t))
			parts := strings.Split(tok, ".")
			c := f.vc11Claims(f.ed)
			setPath(c, "vc.credentialSubject.delegation.scopes", []any{"admin:all"})
			parts[1] = b64(mustJSON(t, c))
			return []byte(strings.Join(parts, "."))
		}, want: ErrSignature, reason: "bad_signature"},
		{name: "wrong key with the issuer's kid", token: func(t *testing.T) []byte {
			return mint(t, f.stranger.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed))
		}, want: ErrSignature, reason: "bad_signature"},
		{name: "ES256 wrong key", token: func(t *testing.T) []byte {
			other := newKey(t, "p256")
			return mint(t, other.priv, header("ES256", f.p256.kid), f.vc11Claims(f.p256))
		}, want: ErrSignature, reason: "bad_signature"},
		{name: "ES256K wrong key", token: func(t *testing.T) []byte {
			other := newKey(t, "secp256k1")
			return mint(t, other.priv, header("ES256K", f.k1.kid), f.vc11Claims(f.k1))
		}, want: ErrSignature, reason: "bad_signature"},
		{name: "JSON VC tampered", token: func(t *testing.T) []byte {
			m := decodeJSON(t, signEd25519JCS(t, f.ed, f.jsonCredential(f.ed), false))
			setPath(m, "credentialSubject.delegation.scopes", []any{"admin:all"})
			return mustJSON(t, m)
		}, want: ErrSignature, reason: "bad_signature"},
		{name: "eddsa-jcs-2022 tampered proof options", token: func(t *testing.T) []byte {
			m := decodeJSON(t, signEddsaJCS2022(t, f.ed, f.jsonCredential(f.ed), nil))
			setPath(m, "proof.created", fixedNow.Add(time.Hour).Format(time.RFC3339))
			return mustJSON(t, m)
		}, want: ErrSignature, reason: "bad_signature"},
		{name: "JSON VC signed by a stranger", token: func(t *testing.T) []byte {
			m := decodeJSON(t, signEd25519JCS(t, f.stranger, f.jsonCredential(f.ed), false))
			setPath(m, "proof.verificationMethod", f.ed.kid)
			return mustJSON(t, m)
		}, want: ErrSignature, reason: "bad_signature"},
		{name: "JSON VC without proof", token: func(t *testing.T) []byte { return mustJSON(t, f.jsonCredential(f.ed)) },
			want: ErrMalformed, reason: "malformed"},
		{name: "JSON VC proofPurpose authentication", token: func(t *testing.T) []byte {
			m := decodeJSON(t, signEd25519JCS(t, f.ed, f.jsonCredential(f.ed), false))
			setPath(m, "proof.proofPurpose", "authentication")
			return mustJSON(t, m)
		}, want: ErrMalformed, reason: "malformed"},
		{name: "JSON VC JsonWebSignature2020", token: func(t *testing.T) []byte {
			m := decodeJSON(t, signEd25519JCS(t, f.ed, f.jsonCredential(f.ed), false))
			setPath(m, "proof.type", "JsonWebSignature2020")
			return mustJSON(t, m)
		}, want: ErrUnsupportedFormat, reason: "unsupported_format"},
		{name: "JSON VC proof set", token: func(t *testing.T) []byte {
			m := decodeJSON(t, signEd25519JCS(t, f.ed, f.jsonCredential(f.ed), false))
			m["proof"] = []any{m["proof"]}
			return mustJSON(t, m)
		}, want: ErrUnsupportedFormat, reason: "unsupported_format"},
		{name: "JSON VP with an assertion proof and no credentials", token: func(t *testing.T) []byte {
			return signEd25519JCS(t, f.agent, map[string]any{"type": []any{"VerifiablePresentation"}, "holder": f.agent.did}, false)
		}, want: ErrPresentation, reason: "bad_presentation"},
		{name: "JSON VC overlong multibase proofValue", token: func(t *testing.T) []byte {
			m := decodeJSON(t, signEd25519JCS(t, f.ed, f.jsonCredential(f.ed), true))
			setPath(m, "proof.proofValue", "z"+strings.Repeat("2", 4000))
			return mustJSON(t, m)
		}, want: ErrMalformed, reason: "malformed"},
		{name: "eddsa-jcs-2022 base64url proofValue", token: func(t *testing.T) []byte {
			m := decodeJSON(t, signEddsaJCS2022(t, f.ed, f.jsonCredential(f.ed), nil))
			setPath(m, "proof.proofValue", b64(make([]byte, 64)))
			return mustJSON(t, m)
		}, want: ErrMalformed, reason: "malformed"},
		{name: "eddsa-jcs-2022 proof @context not a prefix", token: func(t *testing.T) []byte {
			m := decodeJSON(t, signEddsaJCS2022(t, f.ed, f.jsonCredential(f.ed), []any{vc1}))
			setPath(m, "proof.@context", []any{"https://www.w3.org/ns/credentials/v2"})
			return mustJSON(t, m)
		}, want: ErrMalformed, reason: "malformed"},
		{name: "JSON VC credentialSubject array of one", token: jsonVC(func(c map[string]any) {
			c["credentialSubject"] = []any{c["credentialSubject"]}
		}, ed25519JCS(false)), checks: []CheckOption{aud}, format: FormatEd25519JCS},
		{name: "JSON VC credentialSubject array of two", token: jsonVC(func(c map[string]any) {
			c["credentialSubject"] = []any{c["credentialSubject"], c["credentialSubject"]}
		}, ed25519JCS(false)), want: ErrMalformed, reason: "malformed"},
		{name: "JSON VC eddsa-rdfc-2022", token: func(t *testing.T) []byte {
			m := decodeJSON(t, signEddsaJCS2022(t, f.ed, f.jsonCredential(f.ed), nil))
			setPath(m, "proof.cryptosuite", "eddsa-rdfc-2022")
			return mustJSON(t, m)
		}, want: ErrUnsupportedFormat, reason: "unsupported_format"},
		{name: "JSON-LD Ed25519Signature2020 needs RDF", token: func(t *testing.T) []byte {
			c := f.jsonCredential(f.ed)
			c["@context"] = []any{"https://www.w3.org/2018/credentials/v1", "https://w3id.org/security/suites/ed25519-2020/v1"}
			m := decodeJSON(t, signEd25519JCS(t, f.stranger, c, true)) // not a JCS signature by the issuer
			setPath(m, "proof.verificationMethod", f.ed.kid)
			return mustJSON(t, m)
		}, want: ErrUnsupportedFormat, reason: "unsupported_format"},

		{name: "wrong type", token: signed(f.ed, func(c map[string]any) { setPath(c, "vc.type", []any{"VerifiableCredential"}) }),
			checks: []CheckOption{aud}, want: ErrType, reason: "wrong_type"},
		{name: "JSON VC wrong type", token: jsonVC(func(c map[string]any) { c["type"] = "DelegationCredential" }, ed25519JCS(false)),
			checks: []CheckOption{aud}, want: ErrType, reason: "wrong_type"},
		{name: "expired exp", token: signed(f.ed, func(c map[string]any) {
			c["exp"] = fixedNow.Add(-2 * time.Minute).Unix()
		}), checks: []CheckOption{aud}, want: ErrExpired, reason: "expired"},
		{name: "expired expirationDate", token: signed(f.ed, func(c map[string]any) {
			setPath(c, "vc.expirationDate", fixedNow.Add(-2*time.Minute).Format(time.RFC3339))
		}), checks: []CheckOption{aud}, want: ErrExpired, reason: "expired"},
		{name: "expired constraints.notAfter", token: signed(f.ed, func(c map[string]any) {
			setPath(c, "vc.credentialSubject.delegation.constraints.notAfter", fixedNow.Add(-2*time.Minute).Unix())
		}), checks: []CheckOption{aud}, want: ErrExpired, reason: "expired"},
		{name: "expired validUntil", token: func(t *testing.T) []byte {
			p := f.vc20Payload(f.ed)
			p["validUntil"] = fixedNow.Add(-2 * time.Minute).Format(time.RFC3339)
			h := header("EdDSA", f.ed.kid)
			h["typ"] = "vc+jwt"
			return mint(t, f.ed.priv, h, p)
		}, checks: []CheckOption{aud}, want: ErrExpired, reason: "expired"},
		{name: "JSON VC expired", token: jsonVC(func(c map[string]any) {
			c["expirationDate"] = fixedNow.Add(-time.Hour).Format(time.RFC3339)
		}, eddsaJCS(nil)), checks: []CheckOption{aud}, want: ErrExpired, reason: "expired"},
		{name: "not yet valid nbf", token: signed(f.ed, func(c map[string]any) {
			c["nbf"] = fixedNow.Add(2 * time.Minute).Unix()
		}), checks: []CheckOption{aud}, want: ErrNotYetValid, reason: "not_yet_valid"},
		{name: "not yet valid constraints.notBefore", token: signed(f.ed, func(c map[string]any) {
			setPath(c, "vc.credentialSubject.delegation.constraints.notBefore", fixedNow.Add(time.Hour).Unix())
		}), checks: []CheckOption{aud}, want: ErrNotYetValid, reason: "not_yet_valid"},
		{name: "issued in the future", token: signed(f.ed, func(c map[string]any) {
			c["iat"] = fixedNow.Add(5 * time.Minute).Unix()
		}), checks: []CheckOption{aud}, want: ErrNotYetValid, reason: "not_yet_valid"},
		{name: "expired with smaller skew", token: signed(f.ed, func(c map[string]any) {
			c["exp"] = fixedNow.Add(-30 * time.Second).Unix()
		}), opts: []Option{WithClockSkew(10 * time.Second)}, checks: []CheckOption{aud}, want: ErrExpired, reason: "expired"},

		{name: "wrong audience", token: signed(f.ed, nil), checks: []CheckOption{ForAudience("did:web:other.example.com")},
			want: ErrAudience, reason: "wrong_audience"},
		{name: "audience named, none expected", token: signed(f.ed, nil), want: ErrAudience, reason: "wrong_audience"},
		{name: "aud matches but constraints.audience does not", token: signed(f.ed, func(c map[string]any) {
			c["aud"] = serverDID
			setPath(c, "vc.credentialSubject.delegation.constraints.audience", "did:web:other.example.com")
		}), checks: []CheckOption{aud}, want: ErrAudience, reason: "wrong_audience"},
		{name: "audience required but absent", token: signed(f.ed, func(c map[string]any) {
			setPath(c, "vc.credentialSubject.delegation.constraints.audience", del)
		}), checks: []CheckOption{aud, RequireAudience()}, want: ErrAudience, reason: "wrong_audience"},
		{name: "untrusted issuer", token: signed(f.ed, nil), opts: []Option{WithTrustedIssuers(f.p256.did)},
			checks: []CheckOption{aud}, want: ErrUntrustedIssuer, reason: "untrusted_issuer"},
		{name: "empty trust list trusts nobody", token: signed(f.ed, nil), opts: []Option{WithTrustedIssuers()},
			checks: []CheckOption{aud}, want: ErrUntrustedIssuer, reason: "untrusted_issuer"},
		{name: "missing scope", token: signed(f.ed, nil), checks: []CheckOption{aud, RequireScopes("greeting:read", "greeting:delete")},
			want: ErrMissingScope, reason: "missing_scope"},
		{name: "constraints narrow away a scope", token: signed(f.ed, func(c map[string]any) {
			setPath(c, "vc.credentialSubject.delegation.constraints.scopes", []any{"greeting:read"})
		}), checks: []CheckOption{aud, RequireScopes("greeting:write")}, want: ErrMissingScope, reason: "missing_scope"},
	}

	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.token(t)
			d, err := f.verifier(tc.opts...).Verify(ctx, raw, tc.checks...)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if d.Format != tc.format {
					t.Errorf("Format = %q, want %q", d.Format, tc.format)
				}
				if d.Hash != sha256.Sum256(raw) {
					t.Error("Hash is not SHA-256 of the presented bytes")
				}
				if d.AgentDID != f.agent.did {
					t.Errorf("AgentDID = %q, want %q", d.AgentDID, f.agent.did)
				}
				if Reason(err) != "" {
					t.Errorf("Reason(nil) = %q", Reason(err))
				}
				return
			}
			if d != nil {
				t.Errorf("Verify returned a delegation with error %v", err)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify error = %v, want %v", err, tc.want)
			}
			if got := Reason(err); got != tc.reason {
				t.Errorf("Reason = %q, want %q", got, tc.reason)
			}
			if n := sentinelCount(err); n != 1 {
				t.Errorf("error wraps %d sentinels, want exactly 1", n)
			}
			if len(raw) > 16 && strings.Contains(err.Error(), string(raw[:16])) {
				t.Errorf("error message quotes the credential: %v", err)
			}
		})
	}
}

// expectOutcome checks what Verify returned against a table row: a
// delegation (want nil), which check, if any, examines; or a refusal
// (expectRefusal).
func expectOutcome(t *testing.T, d *Delegation, err, want error, reason, detail string, check func(*testing.T, *Delegation)) {
	t.Helper()
	if want != nil {
		expectRefusal(t, d, err, want, reason, detail)
		return
	}
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if check != nil {
		check(t, d)
	}
}

// expectRefusal fails unless Verify refused (d is nil) with an error that
// wraps want and no other sentinel, whose Reason is reason and whose
// message says detail.
func expectRefusal(t *testing.T, d *Delegation, err, want error, reason, detail string) {
	t.Helper()
	t.Logf("error: %v", err)
	if d != nil || !errors.Is(err, want) {
		t.Fatalf("Verify = %v, %v; want %v", d, err, want)
	}
	if got := Reason(err); got != reason {
		t.Errorf("Reason = %q, want %q", got, reason)
	}
	if n := sentinelCount(err); n != 1 {
		t.Errorf("error wraps %d sentinels", n)
	}
	if !strings.Contains(err.Error(), detail) {
		t.Errorf("error %q does not say %q", err, detail)
	}
}

func sentinelCount(err error) int {
	n := 0
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			n++
		}
	}
	return n
}

func algOf(t testing.TB, k testKey) string {
	t.Helper()
	alg, err := algForPrivateKey(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return alg
}

func TestReason(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range reasons {
		got := Reason(fail(r.err, "detail"))
		if got != r.reason || seen[got] {
			t.Errorf("Reason(%v) = %q (duplicate %v)", r.err, got, seen[got])
		}
		seen[got] = true
		if Reason(r.err) != r.reason {
			t.Errorf("Reason of the bare sentinel %v = %q", r.err, Reason(r.err))
		}
	}
	if got := Reason(errors.New("other")); got != "invalid" {
		t.Errorf("Reason(other) = %q, want invalid", got)
	}
	if got := Reason(nil); got != "" {
		t.Errorf("Reason(nil) = %q, want empty", got)
	}
}

// TestDelegationContent checks every field of the result for a KYA-OS
// VC-JWT, a VC 2.0 vc+jwt and a JSON credential.
func TestDelegationContent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	v := f.verifier()

	t.Run("VC 1.1 KYA-OS", func(t *testing.T) {
		c := f.vc11Claims(f.ed)
		c["aud"] = []any{serverDID, "did:web:org.example.com"}
		c["nbf"] = fixedNow.Add(-2 * time.Minute).Unix()
		setPath(c, "vc.credentialSubject.delegation.userDid", "did:web:alice.example.com")
		setPath(c, "vc.credentialSubject.delegation.scopes", []any{"b", "a", "b", "c"})
		setPath(c, "vc.credentialSubject.delegation.constraints.scopes", []any{"a", "b"})
		setPath(c, "vc.credentialSubject.delegation.constraints.notAfter", fixedNow.Add(30*time.Minute).Unix())
		raw := mint(t, f.ed.priv, header("EdDSA", f.ed.kid), c)
		// Surrounding whitespace is not part of the credential.
		d, err := v.Verify(ctx, append(append([]byte("  "), raw...), '\n'), ForAudience(serverDID))
		if err != nil {
			t.Fatal(err)
		}
		want := Delegation{
			AgentDID:     f.agent.did,
			UserDID:      "did:web:alice.example.com",
			Issuer:       f.ed.did,
			Scopes:       []string{"b", "a"},
			Audience:     []string{serverDID, "did:web:org.example.com"},
			IssuedAt:     time.Unix(fixedNow.Add(-time.Minute).Unix(), 0),
			NotBefore:    fixedNow.Add(-time.Minute),
			ExpiresAt:    time.Unix(fixedNow.Add(30*time.Minute).Unix(), 0),
			ID:           "urn:uuid:3f0c0000-0000-4000-8000-000000000001",
			DelegationID: "3f0c0000-0000-4000-8000-000000000001",
			Format:       FormatJWTVC11,
			Hash:         sha256.Sum256(raw),
		}
		assertDelegation(t, d, &want)
		if d.HashRef() != "sha256:"+hexOf(sha256.Sum256(raw)) {
			t.Errorf("HashRef = %q", d.HashRef())
		}
	})

	t.Run("VC 2.0 vc+jwt", func(t *testing.T) {
		h := header("ES256K", f.k1.kid)
		h["typ"] = "vc+jwt"
		raw := mint(t, f.k1.priv, h, f.vc20Payload(f.k1))
		d, err := v.Verify(ctx, raw, ForAudience("did:web:other.example.com"))
		if err != nil {
			t.Fatal(err)
		}
		want := Delegation{
			AgentDID:     f.agent.did,
			UserDID:      f.k1.did,
			Issuer:       f.k1.did,
			Scopes:       []string{"files:read", "files:write"},
			Audience:     []string{serverDID, "did:web:other.example.com"},
			NotBefore:    time.Unix(fixedNow.Add(-time.Minute).Unix(), 0),
			ExpiresAt:    time.Unix(fixedNow.Add(time.Hour).Unix(), 0),
			ID:           "urn:uuid:vc20",
			DelegationID: "urn:uuid:vc20",
			Format:       FormatJWTVC20,
			Hash:         sha256.Sum256(raw),
		}
		assertDelegation(t, d, &want)
	})

	t.Run("JSON eddsa-jcs-2022", func(t *testing.T) {
		c := f.jsonCredential(f.ed)
		setPath(c, "credentialSubject.delegation.scopes", del)
		setPath(c, "credentialSubject.delegation.constraints.scopes", []any{"x:y"})
		raw := signEddsaJCS2022(t, f.ed, c, nil)
		d, err := v.Verify(ctx, raw, ForAudience(serverDID), RequireScopes("x:y"))
		if err != nil {
			t.Fatal(err)
		}
		want := Delegation{
			AgentDID:     f.agent.did,
			UserDID:      f.ed.did,
			Issuer:       f.ed.did,
			Scopes:       []string{"x:y"},
			Audience:     []string{serverDID},
			IssuedAt:     fixedNow.Add(-time.Minute),
			NotBefore:    fixedNow.Add(-time.Minute),
			ExpiresAt:    fixedNow.Add(time.Hour),
			ID:           "urn:uuid:3f0c0000-0000-4000-8000-000000000001",
			DelegationID: "3f0c0000-0000-4000-8000-000000000001",
			Format:       FormatEddsaJCS2022,
			Hash:         sha256.Sum256(raw),
		}
		assertDelegation(t, d, &want)
	})
}

// TestScopeSources checks where scopes come from, in precedence order.
func TestScopeSources(t *testing.T) {
	f := newFixture(t)
	deleg := "vc.credentialSubject.delegation."
	tests := []struct {
		name  string
		tweak func(c map[string]any)
		want  []string
	}{
		{"delegation.scopes only", func(c map[string]any) {
			setPath(c, deleg+"scopes", []any{"a", "b", "a"})
			setPath(c, deleg+"constraints.scopes", del)
		}, []string{"a", "b"}},
		{"constraints.scopes only", func(c map[string]any) {
			setPath(c, deleg+"scopes", del)
			setPath(c, deleg+"constraints.scopes", []any{"c"})
		}, []string{"c"}},
		{"both: intersection", func(c map[string]any) {
			setPath(c, deleg+"scopes", []any{"a", "b", "c"})
			setPath(c, deleg+"constraints.scopes", []any{"c", "a"})
		}, []string{"a", "c"}},
		{"both, constraints empty", func(c map[string]any) {
			setPath(c, deleg+"constraints.scopes", []any{})
		}, []string{}},
		{"credentialSubject.scope string", func(c map[string]any) {
			setPath(c, "vc.credentialSubject.delegation", del)
			setPath(c, "vc.credentialSubject.scope", "  s1 s2  s1 ")
		}, []string{"s1", "s2"}},
		{"credentialSubject.scopes array", func(c map[string]any) {
			setPath(c, "vc.credentialSubject.delegation", del)
			setPath(c, "vc.credentialSubject.scopes", []any{"s3"})
		}, []string{"s3"}},
		{"top-level JWT scope array", func(c map[string]any) {
			setPath(c, deleg+"scopes", del)
			setPath(c, deleg+"constraints.scopes", del)
			c["scope"] = []any{"t1", "t2"}
		}, []string{"t1", "t2"}},
		{"delegation wins over top-level scope", func(c map[string]any) {
			c["scope"] = "t1"
		}, []string{"greeting:read", "greeting:write"}},
		{"none", func(c map[string]any) {
			setPath(c, deleg+"scopes", del)
			setPath(c, deleg+"constraints.scopes", del)
		}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := f.vc11Claims(f.ed)
			tc.tweak(c)
			d, err := f.verifier().Verify(context.Background(), mint(t, f.ed.priv, header("EdDSA", f.ed.kid), c), ForAudience(serverDID))
			if err != nil {
				t.Fatal(err)
			}
			if !equalStrings(d.Scopes, tc.want) {
				t.Errorf("Scopes = %q, want %q", d.Scopes, tc.want)
			}
		})
	}
}

func TestVerifyCanceledContext(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.verifier().Verify(ctx, mint(t, f.ed.priv, header("EdDSA", f.ed.kid), f.vc11Claims(f.ed)), ForAudience(serverDID))
	if !errors.Is(err, ErrIssuerUnresolved) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrIssuerUnresolved wrapping context.Canceled", err)
	}
}

func assertDelegation(t *testing.T, got, want *Delegation) {
	t.Helper()
	if got.AgentDID != want.AgentDID || got.UserDID != want.UserDID || got.Issuer != want.Issuer {
		t.Errorf("agent/user/issuer = %q %q %q, want %q %q %q",
			got.AgentDID, got.UserDID, got.Issuer, want.AgentDID, want.UserDID, want.Issuer)
	}
	if !equalStrings(got.Scopes, want.Scopes) {
		t.Errorf("Scopes = %q, want %q", got.Scopes, want.Scopes)
	}
	if !equalStrings(got.Audience, want.Audience) {
		t.Errorf("Audience = %q, want %q", got.Audience, want.Audience)
	}
	for _, c := range []struct {
		name      string
		got, want time.Time
	}{{"IssuedAt", got.IssuedAt, want.IssuedAt}, {"NotBefore", got.NotBefore, want.NotBefore}, {"ExpiresAt", got.ExpiresAt, want.ExpiresAt}} {
		if !c.got.Equal(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if got.ID != want.ID || got.DelegationID != want.DelegationID {
		t.Errorf("ID, DelegationID = %q, %q, want %q, %q", got.ID, got.DelegationID, want.ID, want.DelegationID)
	}
	if got.Format != want.Format {
		t.Errorf("Format = %q, want %q", got.Format, want.Format)
	}
	if got.Hash != want.Hash {
		t.Error("Hash differs")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func hexOf(h [32]byte) string { return hex.EncodeToString(h[:]) }

// flipSignatureBit changes one bit of a compact JWS signature.
func flipSignatureBit(t testing.TB, tok []byte) []byte {
	t.Helper()
	i := bytes.LastIndexByte(tok, '.')
	sig, err := b64url.DecodeString(string(tok[i+1:]))
	if err != nil {
		t.Fatal(err)
	}
	sig[len(sig)/2] ^= 1
	return append(tok[:i+1:i+1], b64(sig)...)
}
