package vc_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hyperledger/aries-framework-go/component/models/ld/processor"
	"github.com/hyperledger/aries-framework-go/component/models/ld/proof"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/ldproof"
	"github.com/mr-tron/base58"
	"github.com/piprate/json-gold/ld"
)

const (
	ldAudience = "did:web:mcp.example.com"
	ldKYA      = "https://schema.kya-os.org/v1/protocol/delegation/context/v1.0.0"
)

var ldNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// TestLinkedDataDelegation verifies JSON-LD DelegationCredentials with real
// Linked Data proofs end to end: a did:key issuer resolved by
// didresolver.New(), the proof checked by ldproof, the delegation read
// from the JSON.
func TestLinkedDataDelegation(t *testing.T) {
	_, issuerKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	issuer, kid, err := didresolver.KeyDID(issuerKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	agentPub, _, _ := ed25519.GenerateKey(rand.Reader)
	agent, _, _ := didresolver.KeyDID(agentPub)

	ldv, err := ldproof.New()
	if err != nil {
		t.Fatal(err)
	}
	verifier := func(opts ...vc.Option) *vc.Verifier {
		base := []vc.Option{vc.WithClock(func() time.Time { return ldNow }), vc.WithLinkedDataVerifier(ldv)}
		return vc.NewVerifier(didresolver.New(), append(base, opts...)...)
	}
	signer := newLDSigner(t)
	ctx := context.Background()

	for _, tc := range []struct {
		name   string
		sign   func(map[string]any) map[string]any
		format vc.Format
	}{
		{"Ed25519Signature2020", func(d map[string]any) map[string]any {
			d["@context"] = append(d["@context"].([]any), "https://w3id.org/security/suites/ed25519-2020/v1")
			return signer.ed25519Signature2020(t, d, issuerKey, kid)
			// jsonvc.go tries the MCP-I JCS variant of this proof type
			// first; the format says which one verified.
		}, vc.Format("Ed25519Signature2020")},
		{"eddsa-rdfc-2022", func(d map[string]any) map[string]any {
			d["@context"] = append(d["@context"].([]any), "https://w3id.org/security/data-integrity/v2")
			return signer.eddsaRdfc2022(t, d, issuerKey, kid)
		}, "DataIntegrityProof"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signed := tc.sign(ldDelegation(issuer, agent))
			raw := ldJSON(t, signed)

			d, err := verifier().Verify(ctx, raw, vc.ForAudience(ldAudience), vc.RequireScopes("greeting:read"))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if d.Issuer != issuer || d.AgentDID != agent || d.Format != tc.format ||
				strings.Join(d.Scopes, " ") != "greeting:read greeting:write" ||
				d.DelegationID != "urn:uuid:0d1e0000-0000-4000-8000-000000000002" {
				t.Errorf("delegation = %+v", d)
			}

			// A credential that states no end is refused unless the
			// verifier opts in.
			endless := ldDelegation(issuer, agent)
			delete(endless, "expirationDate")
			rawEndless := ldJSON(t, tc.sign(endless))
			if _, err := verifier().Verify(ctx, rawEndless, vc.ForAudience(ldAudience)); !errors.Is(err, vc.ErrNoExpiry) {
				t.Errorf("no end: err = %v, want ErrNoExpiry", err)
			}
			if _, err := verifier(vc.WithAllowNoExpiry()).Verify(ctx, rawEndless, vc.ForAudience(ldAudience)); err != nil {
				t.Errorf("no end, WithAllowNoExpiry: %v", err)
			}

			// A changed scope breaks the signature.
			m := ldCopy(t, signed)
			m["credentialSubject"].(map[string]any)["delegation"].(map[string]any)["scopes"] = []any{"greeting:read", "admin"}
			if _, err := verifier().Verify(ctx, ldJSON(t, m), vc.ForAudience(ldAudience)); !errors.Is(err, vc.ErrSignature) {
				t.Errorf("changed scope: err = %v, want ErrSignature", err)
			}

			// An unknown context is never fetched: unsupported.
			m = ldCopy(t, signed)
			m["@context"] = append(m["@context"].([]any), "https://contexts.example.com/unknown")
			_, err = verifier().Verify(ctx, ldJSON(t, m), vc.ForAudience(ldAudience))
			if !errors.Is(err, vc.ErrUnsupportedFormat) || !errors.Is(err, ldproof.ErrContext) {
				t.Errorf("unknown context: err = %v, want ErrUnsupportedFormat and ldproof.ErrContext", err)
			}
			if strings.Contains(err.Error(), "contexts.example.com") {
				t.Errorf("error quotes the credential: %v", err)
			}

			// An inline context is refused, and the error says so: it is
			// not a context that could not be found.
			m = ldCopy(t, signed)
			m["@context"] = append(m["@context"].([]any), map[string]any{"@vocab": "https://example.com/vocab#"})
			_, err = verifier().Verify(ctx, ldJSON(t, m), vc.ForAudience(ldAudience))
			if vc.Reason(err) != "unsupported_format" || !errors.Is(err, ldproof.ErrInlineContext) ||
				!strings.Contains(err.Error(), "inline JSON-LD context refused: the signature does not cover it") ||
				strings.Contains(err.Error(), "not available") {
				t.Errorf("inline context: err = %v (%s), want unsupported_format saying the inline context is refused", err, vc.Reason(err))
			}

			// The algorithm allow-list applies to the issuer key.
			if _, err := verifier(vc.WithAllowedAlgs(vc.AlgES256)).Verify(ctx, raw, vc.ForAudience(ldAudience)); !errors.Is(err, vc.ErrAlgorithm) {
				t.Errorf("EdDSA not allowed: err = %v, want ErrAlgorithm", err)
			}

			// Without a Linked Data verifier the proof is not supported.
			plain := vc.NewVerifier(didresolver.New(), vc.WithClock(func() time.Time { return ldNow }))
			if _, err := plain.Verify(ctx, raw, vc.ForAudience(ldAudience)); !errors.Is(err, vc.ErrUnsupportedFormat) {
				t.Errorf("without WithLinkedDataVerifier: err = %v, want ErrUnsupportedFormat", err)
			}
		})
	}
}

func ldDelegation(issuer, agent string) map[string]any {
	return map[string]any{
		"@context":       []any{"https://www.w3.org/2018/credentials/v1", ldKYA},
		"id":             "urn:uuid:0d1e0000-0000-4000-8000-000000000001",
		"type":           []any{"VerifiableCredential", "DelegationCredential"},
		"issuer":         issuer,
		"issuanceDate":   "2026-03-01T11:00:00Z",
		"expirationDate": "2026-03-01T13:00:00Z",
		"credentialSubject": map[string]any{
			"id": agent,
			"delegation": map[string]any{
				"id":         "urn:uuid:0d1e0000-0000-4000-8000-000000000002",
				"issuerDid":  issuer,
				"subjectDid": agent,
				"scopes":     []any{"greeting:read", "greeting:write"},
				"constraints": map[string]any{
					"scopes":   []any{"greeting:read", "greeting:write"},
					"audience": ldAudience,
				},
				"status": "active",
			},
		},
	}
}

// ldSigner signs with aries' ld/proof verify data over aries' JSON-LD
// processor, loading the contexts ldproof embeds from their files.
type ldSigner struct{ loader ld.DocumentLoader }

func newLDSigner(t *testing.T) ldSigner {
	t.Helper()
	files := map[string]string{
		"https://www.w3.org/2018/credentials/v1": "credentials-v1.jsonld",
		ldKYA:                                    "kya-delegation-v1.0.0.jsonld",
		"https://w3id.org/security/suites/ed25519-2020/v1": "ed25519-2020-v1.jsonld",
		"https://w3id.org/security/data-integrity/v2":      "data-integrity-v2.jsonld",
	}
	docs := ldLoader{}
	for u, f := range files {
		b, err := os.ReadFile("ldproof/contexts/" + f)
		if err != nil {
			t.Fatal(err)
		}
		var d any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		docs[u] = d
	}
	return ldSigner{loader: docs}
}

type ldLoader map[string]any

func (l ldLoader) LoadDocument(u string) (*ld.RemoteDocument, error) {
	if d, ok := l[u]; ok {
		return &ld.RemoteDocument{DocumentURL: u, Document: d}, nil
	}
	return nil, errors.New("unknown context " + u)
}

func (s ldSigner) GetCanonicalDocument(doc map[string]any, opts ...processor.Opts) ([]byte, error) {
	return processor.Default().GetCanonicalDocument(doc, append(opts, processor.WithDocumentLoader(s.loader))...)
}

func (ldSigner) GetDigest(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

func (ldSigner) CompactProof() bool { return false }

func (s ldSigner) ed25519Signature2020(t *testing.T, doc map[string]any, key ed25519.PrivateKey, kid string) map[string]any {
	t.Helper()
	pf := map[string]any{
		"type": "Ed25519Signature2020", "created": "2026-03-01T11:00:00Z",
		"verificationMethod": kid, "proofPurpose": "assertionMethod",
		"proofValue": "z" + base58.Encode(make([]byte, 64)),
	}
	p, err := proof.NewProof(pf)
	if err != nil {
		t.Fatal(err)
	}
	data, err := proof.CreateVerifyData(s, ldCopy(t, doc), p)
	if err != nil {
		t.Fatal(err)
	}
	pf["proofValue"] = "z" + base58.Encode(ed25519.Sign(key, data))
	doc["proof"] = pf
	return doc
}

func (s ldSigner) eddsaRdfc2022(t *testing.T, doc map[string]any, key ed25519.PrivateKey, kid string) map[string]any {
	t.Helper()
	pf := map[string]any{
		"type": "DataIntegrityProof", "cryptosuite": "eddsa-rdfc-2022", "created": "2026-03-01T11:00:00Z",
		"verificationMethod": kid, "proofPurpose": "assertionMethod",
	}
	cfg := ldCopy(t, pf)
	cfg["@context"] = doc["@context"]
	pc, err := s.GetCanonicalDocument(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := s.GetCanonicalDocument(ldCopy(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	pf["proofValue"] = "z" + base58.Encode(ed25519.Sign(key, append(s.GetDigest(pc), s.GetDigest(dc)...)))
	doc["proof"] = pf
	return doc
}

func ldJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ldCopy(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(ldJSON(t, m), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLinkedDataKeepsJCS: with the Linked Data verifier wired, MCP-I JCS
// credentials (Ed25519Signature2020 with a base64url proofValue) still
// verify through the JCS path, and a forged one still fails with
// ErrSignature after the JSON-LD attempt.
func TestLinkedDataKeepsJCS(t *testing.T) {
	_, issuerKey, _ := ed25519.GenerateKey(rand.Reader)
	issuer, kid, err := didresolver.KeyDID(issuerKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	agentPub, _, _ := ed25519.GenerateKey(rand.Reader)
	agent, _, _ := didresolver.KeyDID(agentPub)
	raw, err := vc.IssueJSON(issuerKey, kid, vc.Template{
		AgentDID: agent, Scopes: []string{"greeting:read"}, ExpiresAt: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	ldv, err := ldproof.New()
	if err != nil {
		t.Fatal(err)
	}
	v := vc.NewVerifier(didresolver.New(), vc.WithLinkedDataVerifier(ldv))
	ctx := context.Background()
	d, err := v.Verify(ctx, raw)
	if err != nil {
		t.Fatalf("JCS credential: %v", err)
	}
	if d.Issuer != issuer || d.Format != vc.FormatEd25519JCS {
		t.Errorf("delegation = %+v", d)
	}
	forged := strings.Replace(string(raw), `"greeting:read"`, `"greeting:admin"`, -1)
	if _, err := v.Verify(ctx, []byte(forged)); !errors.Is(err, vc.ErrSignature) {
		t.Errorf("forged JCS credential: err = %v, want ErrSignature", err)
	}
}
