package ldproof

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mr-tron/base58"
)

// sentinels are the errors every failure must wrap one of.
var sentinels = []error{ErrSignature, ErrMalformed, ErrUnsupported, ErrContext, ErrKeyType}

// TestThirdPartyVectors verifies credentials signed by other
// implementations (testdata/SOURCES.md), and the same credentials with a
// claim changed.
func TestThirdPartyVectors(t *testing.T) {
	noNetwork(t)
	v := newVerifier(t)
	w3cKey := multikeyEd25519(t, "z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2")
	tests := []struct {
		name, file string
		key        didresolver.Key
		claim      string // a dotted path to a signed string member
	}{
		{"w3c eddsa-rdfc-2022", "w3c-eddsa-rdfc-2022.json", w3cKey, "credentialSubject.alumniOf"},
		{"w3c Ed25519Signature2020", "w3c-ed25519signature2020.json", w3cKey, "credentialSubject.alumniOf"},
		{"did:key Ed25519Signature2018 (jsonld-signatures)", "didkey-ed25519signature2018.json",
			base58Ed25519(t, "DNwKNoq5MnZ185AyatKe3kT7MMCDD7R2PeNDV6FndMkz"), "credentialSubject.degree.name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := readFile(t, "testdata/"+tc.file)
			if err := v.Verify(context.Background(), raw, tc.key); err != nil {
				t.Fatalf("valid vector: %v", err)
			}
			m := decode(t, raw)
			set(m, tc.claim, "The School of Forgery")
			if err := v.Verify(context.Background(), mustJSON(t, m), tc.key); !errors.Is(err, ErrSignature) {
				t.Errorf("changed claim: err = %v, want ErrSignature", err)
			}
			other := newKey(t, didresolver.Ed25519)
			if err := v.Verify(context.Background(), raw, other.key); !errors.Is(err, ErrSignature) {
				t.Errorf("other key: err = %v, want ErrSignature", err)
			}
		})
	}
}

// TestUnsignedMemberRefused: the Transmute Ed25519Signature2018 vector
// (from aries' tests) carries "profile": "", which the examples context
// types as an IRI; an empty IRI is dropped from the RDF, so the member is
// not signed. ldproof refuses it; without the member the same signature
// verifies, which shows it was never covered.
func TestUnsignedMemberRefused(t *testing.T) {
	v := newVerifier(t)
	key := base58Ed25519(t, "DqS5F3GVe3rCxucgi4JBNagjv4dKoHc8TDLDw9kR58Pz")
	raw := readFile(t, "testdata/transmute-ed25519signature2018.json")
	if err := v.Verify(context.Background(), raw, key); !errors.Is(err, ErrMalformed) {
		t.Fatalf("with an unsigned member: err = %v, want ErrMalformed", err)
	}
	m := decode(t, raw)
	set(m, "profile", nil)
	if err := v.Verify(context.Background(), mustJSON(t, m), key); err != nil {
		t.Fatalf("without it: %v", err)
	}
}

// TestSuites signs a KYA-OS DelegationCredential with every suite and key
// type, then checks the valid, tampered, wrong-key and wrong-key-type
// cases.
func TestSuites(t *testing.T) {
	noNetwork(t)
	v := newVerifier(t)
	loader := signerLoader(t, nil)
	ed := newKey(t, didresolver.Ed25519)
	p256 := newKey(t, didresolver.P256)
	k1 := newKey(t, didresolver.Secp256k1)
	tests := []struct {
		name, typ, alg string
		key            testKey
		wrongType      testKey
		extraContext   string
	}{
		{"Ed25519Signature2018", TypeEd25519Signature2018, algEdDSA, ed, p256, ""},
		{"Ed25519Signature2018 (v2, suite context)", TypeEd25519Signature2018, algEdDSA, ed, k1, "https://w3id.org/security/suites/ed25519-2018/v1"},
		{"Ed25519Signature2020", TypeEd25519Signature2020, algEdDSA, ed, k1, "https://w3id.org/security/suites/ed25519-2020/v1"},
		{"JsonWebSignature2020 EdDSA", TypeJsonWebSignature2020, algEdDSA, ed, p256, "https://w3id.org/security/suites/jws-2020/v1"},
		{"JsonWebSignature2020 ES256", TypeJsonWebSignature2020, algES256, p256, ed, "https://w3id.org/security/suites/jws-2020/v1"},
		{"JsonWebSignature2020 ES256K", TypeJsonWebSignature2020, algES256K, k1, p256, "https://w3id.org/security/suites/jws-2020/v1"},
		{"EcdsaSecp256k1Signature2019", TypeEcdsaSecp256k1Signature2019, algES256K, k1, ed, ""},
		{"EcdsaSecp256k1Signature2019 (v2, suite context)", TypeEcdsaSecp256k1Signature2019, algES256K, k1, p256, "https://w3id.org/security/suites/secp256k1-2019/v1"},
		{"eddsa-rdfc-2022", TypeDataIntegrityProof, algEdDSA, ed, p256, "https://w3id.org/security/data-integrity/v2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := delegation("did:key:issuer")
			if tc.extraContext != "" {
				// The 2018/2019 suite contexts conflict with credentials v1,
				// which defines those proof types itself.
				doc["@context"] = []any{vcV2, kyaContext, tc.extraContext}
			}
			var signed map[string]any
			if tc.typ == TypeDataIntegrityProof {
				signed = signRdfc2022(t, loader, doc, tc.key)
			} else {
				signed = signLD(t, loader, doc, tc.typ, tc.alg, tc.key)
			}
			raw := mustJSON(t, signed)
			ctx := context.Background()
			if err := v.Verify(ctx, raw, tc.key.key); err != nil {
				t.Fatalf("valid: %v", err)
			}
			for path, val := range map[string]any{
				"credentialSubject.delegation.scopes":               []any{"greeting:read", "greeting:admin"},
				"credentialSubject.delegation.constraints.audience": "did:web:evil.example.com",
				"expirationDate":                  "2099-01-01T00:00:00Z",
				"issuer":                          "did:key:someoneelse",
				"credentialSubject.id":            "did:key:z6MkattackerAgent",
				"credentialSubject.delegation.id": "urn:uuid:3f0c0000-0000-4000-8000-000000000099",
			} {
				m := copyMap(signed)
				set(m, path, val)
				if err := v.Verify(ctx, mustJSON(t, m), tc.key.key); !errors.Is(err, ErrSignature) {
					t.Errorf("changed %s: err = %v, want ErrSignature", path, err)
				}
			}
			other := newKey(t, keyTypeOf(tc.key))
			if err := v.Verify(ctx, raw, other.key); !errors.Is(err, ErrSignature) {
				t.Errorf("another key of the same type: err = %v, want ErrSignature", err)
			}
			err := v.Verify(ctx, raw, tc.wrongType.key)
			if !errors.Is(err, ErrKeyType) || !errors.Is(err, ErrUnsupported) {
				t.Errorf("wrong key type: err = %v, want ErrKeyType and ErrUnsupported", err)
			}
		})
	}
}

func keyTypeOf(k testKey) didresolver.KeyType {
	switch k.alg() {
	case algES256:
		return didresolver.P256
	case algES256K:
		return didresolver.Secp256k1
	}
	return didresolver.Ed25519
}

func (k testKey) alg() string {
	for _, a := range []string{algEdDSA, algES256, algES256K} {
		if keyFits(a, k.key) {
			return a
		}
	}
	return ""
}

// TestAddedMember: a member added after signing is either undefined (an
// error) or mapped (and then it breaks the signature); it is never
// silently unsigned.
func TestAddedMember(t *testing.T) {
	v := newVerifier(t)
	loader := signerLoader(t, nil)
	ed := newKey(t, didresolver.Ed25519)
	ctx := context.Background()

	// Credentials v1 alone defines no "scopes": an added one is undefined.
	v1 := delegation("did:key:issuer")
	v1["@context"] = []any{vcV1}
	v1["type"] = []any{"VerifiableCredential"}
	delete(v1["credentialSubject"].(map[string]any), "delegation")
	signed := signLD(t, loader, v1, TypeEd25519Signature2018, algEdDSA, ed)
	if err := v.Verify(ctx, mustJSON(t, signed), ed.key); err != nil {
		t.Fatalf("valid: %v", err)
	}
	m := copyMap(signed)
	set(m, "credentialSubject.scopes", []any{"admin"})
	if err := v.Verify(ctx, mustJSON(t, m), ed.key); !errors.Is(err, ErrMalformed) {
		t.Errorf("undefined member added: err = %v, want ErrMalformed", err)
	}
	m = copyMap(signed)
	m["type"] = []any{"VerifiableCredential", "DelegationCredential"}
	if err := v.Verify(ctx, mustJSON(t, m), ed.key); !errors.Is(err, ErrMalformed) {
		t.Errorf("undefined type added: err = %v, want ErrMalformed", err)
	}

	// The KYA context maps every term (@vocab): an added one is signed data.
	kya := signLD(t, loader, delegation("did:key:issuer"), TypeEd25519Signature2018, algEdDSA, ed)
	m = copyMap(kya)
	set(m, "credentialSubject.delegation.constraints.extra", "x")
	if err := v.Verify(ctx, mustJSON(t, m), ed.key); !errors.Is(err, ErrSignature) {
		t.Errorf("mapped member added: err = %v, want ErrSignature", err)
	}
}

// TestRelativeIRI: a delegation id that is not an absolute IRI would drop
// the whole delegation object (scopes, constraints) from the signed RDF.
func TestRelativeIRI(t *testing.T) {
	v := newVerifier(t)
	loader := signerLoader(t, nil)
	ed := newKey(t, didresolver.Ed25519)
	doc := delegation("did:key:issuer")
	set(doc, "credentialSubject.delegation.id", "3f0c0000-0000-4000-8000-000000000002")
	signed := signLD(t, loader, doc, TypeEd25519Signature2018, algEdDSA, ed)
	if err := v.Verify(context.Background(), mustJSON(t, signed), ed.key); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
	// The signature does not cover the scopes: the signer's RDF lacks them.
	set(signed, "credentialSubject.delegation.scopes", []any{"everything"})
	if err := v.Verify(context.Background(), mustJSON(t, signed), ed.key); !errors.Is(err, ErrMalformed) {
		t.Fatalf("changed scopes: err = %v, want ErrMalformed", err)
	}
}

// TestUnknownContext: a context that is neither embedded nor supplied is
// never fetched.
func TestUnknownContext(t *testing.T) {
	noNetwork(t)
	v := newVerifier(t)
	ed := newKey(t, didresolver.Ed25519)
	raw := readFile(t, "testdata/w3c-ed25519signature2020.json")
	m := decode(t, raw)
	m["@context"] = append(m["@context"].([]any), "https://example.com/contexts/unknown/v1")
	err := v.Verify(context.Background(), mustJSON(t, m), ed.key)
	if !errors.Is(err, ErrContext) {
		t.Fatalf("err = %v, want ErrContext", err)
	}
	var ce *ContextError
	if !errors.As(err, &ce) || ce.URL != "https://example.com/contexts/unknown/v1" {
		t.Errorf("ContextError = %+v", ce)
	}
	// An unknown context in an @import of a supplied one, too.
	v2 := newVerifier(t, WithContext("https://example.com/ctx", []byte(`{"@context": {"@version": 1.1, "@import": "https://example.com/imported"}}`)))
	m["@context"] = []any{vcV2, "https://example.com/ctx"}
	if err := v2.Verify(context.Background(), mustJSON(t, m), ed.key); !errors.Is(err, ErrContext) {
		t.Errorf("@import: err = %v, want ErrContext", err)
	}
}

// TestInlineContext: refused unless WithInlineContexts.
func TestInlineContext(t *testing.T) {
	noNetwork(t)
	loader := signerLoader(t, nil)
	ed := newKey(t, didresolver.Ed25519)
	doc := delegation("did:key:issuer")
	doc["@context"] = []any{vcV1, map[string]any{"@vocab": "https://example.com/vocab#"}}
	raw := mustJSON(t, signLD(t, loader, doc, TypeEd25519Signature2020, algEdDSA, ed))
	err := newVerifier(t).Verify(context.Background(), raw, ed.key)
	var k interface{ ProofErrorKind() string }
	if !errors.Is(err, ErrInlineContext) || !errors.Is(err, ErrContext) || !errors.As(err, &k) || k.ProofErrorKind() != "inline_context" {
		t.Fatalf("inline context: err = %v, want ErrInlineContext (kind inline_context), which is an ErrContext", err)
	}
	if strings.Contains(err.Error(), "not available") {
		t.Errorf("inline context: %q says the context is not available", err)
	}
	if err := newVerifier(t, WithInlineContexts()).Verify(context.Background(), raw, ed.key); err != nil {
		t.Fatalf("WithInlineContexts: %v", err)
	}
	// Nested contexts count as inline too.
	doc = delegation("did:key:issuer")
	set(doc, "credentialSubject.@context", map[string]any{"x": "https://example.com/x"})
	raw = mustJSON(t, signLD(t, loader, doc, TypeEd25519Signature2020, algEdDSA, ed))
	if err := newVerifier(t).Verify(context.Background(), raw, ed.key); !errors.Is(err, ErrInlineContext) {
		t.Fatalf("nested context: err = %v, want ErrInlineContext", err)
	}
}

// TestOperatorContext: a context supplied as a file makes a credential
// that uses it verifiable.
func TestOperatorContext(t *testing.T) {
	const url = "https://issuer.example.com/contexts/agent/v1"
	ctxDoc := []byte(`{"@context": {"@version": 1.1, "AgentCredential": "https://issuer.example.com/ns#AgentCredential", "agentName": "https://issuer.example.com/ns#agentName"}}`)
	path := filepath.Join(t.TempDir(), "agent.jsonld")
	if err := os.WriteFile(path, ctxDoc, 0o600); err != nil {
		t.Fatal(err)
	}
	loader := signerLoader(t, map[string][]byte{url: ctxDoc})
	ed := newKey(t, didresolver.Ed25519)
	doc := map[string]any{
		"@context":          []any{vcV2, url},
		"type":              []any{"VerifiableCredential", "AgentCredential"},
		"issuer":            "did:key:issuer",
		"credentialSubject": map[string]any{"id": "did:key:agent", "agentName": "helper"},
	}
	raw := mustJSON(t, signRdfc2022(t, loader, doc, ed))
	if err := newVerifier(t).Verify(context.Background(), raw, ed.key); !errors.Is(err, ErrContext) {
		t.Fatalf("without the file: err = %v, want ErrContext", err)
	}
	if err := newVerifier(t, WithContextFile(url, path)).Verify(context.Background(), raw, ed.key); err != nil {
		t.Fatalf("with the file: %v", err)
	}
	if _, err := New(WithContextFile(url, filepath.Join(t.TempDir(), "missing"))); err == nil {
		t.Error("New with a missing file succeeded")
	}
	if _, err := New(WithContext(url, []byte(`[1]`))); err == nil {
		t.Error("New with a non-object context succeeded")
	}
	if _, err := New(WithContext(url, []byte(`{"a": 1}`))); err == nil {
		t.Error("New with a document without @context succeeded")
	}
}

func TestSupports(t *testing.T) {
	v := newVerifier(t)
	for _, tc := range []struct {
		typ, cs string
		want    bool
	}{
		{"Ed25519Signature2018", "", true},
		{"Ed25519Signature2020", "", true},
		{"JsonWebSignature2020", "", true},
		{"EcdsaSecp256k1Signature2019", "", true},
		{"DataIntegrityProof", "eddsa-rdfc-2022", true},
		{"DataIntegrityProof", "eddsa-jcs-2022", false},
		{"DataIntegrityProof", "ecdsa-rdfc-2019", false},
		{"DataIntegrityProof", "", false},
		{"Ed25519Signature2020", "eddsa-rdfc-2022", false},
		{"RsaSignature2018", "", false},
		{"BbsBlsSignature2020", "", false},
		{"", "", false},
	} {
		if got := v.Supports(tc.typ, tc.cs); got != tc.want {
			t.Errorf("Supports(%q, %q) = %v", tc.typ, tc.cs, got)
		}
	}
}

// TestRefusals: one row per failure that is not about the signature.
func TestRefusals(t *testing.T) {
	noNetwork(t)
	v := newVerifier(t)
	loader := signerLoader(t, nil)
	ed := newKey(t, didresolver.Ed25519)
	ed2020 := signLD(t, loader, delegation("did:key:issuer"), TypeEd25519Signature2020, algEdDSA, ed)
	jws := signLD(t, loader, delegation("did:key:issuer"), TypeEd25519Signature2018, algEdDSA, ed)
	rdfc := signRdfc2022(t, loader, delegation("did:key:issuer"), ed)
	with := func(m map[string]any, path string, val any) []byte {
		c := copyMap(m)
		set(c, path, val)
		return mustJSON(t, c)
	}
	tests := []struct {
		name string
		raw  []byte
		want error
	}{
		{"not JSON", []byte("{"), ErrMalformed},
		{"JSON array", []byte("[]"), ErrMalformed},
		{"no proof", with(ed2020, "proof", nil), ErrMalformed},
		{"proof set", with(ed2020, "proof", []any{ed2020["proof"]}), ErrUnsupported},
		{"unsupported type", with(ed2020, "proof.type", "RsaSignature2018"), ErrUnsupported},
		{"unsupported cryptosuite", with(rdfc, "proof.cryptosuite", "ecdsa-rdfc-2019"), ErrUnsupported},
		{"cryptosuite on a legacy type", with(ed2020, "proof.cryptosuite", "eddsa-rdfc-2022"), ErrUnsupported},
		{"2020 with a JWS", with(jws, "proof.type", TypeEd25519Signature2020), ErrUnsupported},
		{"JWS2020 with a proofValue", with(ed2020, "proof.type", TypeJsonWebSignature2020), ErrUnsupported},
		{"JWS alg none", with(jws, "proof.jws", "eyJhbGciOiJub25lIiwiYjY0IjpmYWxzZSwiY3JpdCI6WyJiNjQiXX0..AA"), ErrUnsupported},
		{"JWS with b64 true", with(jws, "proof.jws", "eyJhbGciOiJFZERTQSIsImI2NCI6dHJ1ZSwiY3JpdCI6WyJiNjQiXX0..AA"), ErrMalformed},
		{"JWS with a payload", with(jws, "proof.jws", "eyJhbGciOiJFZERTQSIsImI2NCI6ZmFsc2UsImNyaXQiOlsiYjY0Il19.e30.AA"), ErrMalformed},
		{"JWS header not JSON", with(jws, "proof.jws", "bm90IGpzb24..AA"), ErrMalformed},
		{"no created", with(ed2020, "proof.created", nil), ErrMalformed},
		{"no proofValue", with(ed2020, "proof.proofValue", nil), ErrMalformed},
		{"2020 proofValue not multibase", with(ed2020, "proof.proofValue", "zzzz0OIl"), ErrSignature},
		{"2020 base64url proofValue (MCP-I JCS)", with(ed2020, "proof.proofValue", strings.Repeat("A", 86)), ErrSignature},
		{"2018 bad proofValue", with(jws, "proof", map[string]any{"type": TypeEd25519Signature2018, "created": created, "proofValue": "%%%"}), ErrMalformed},
		{"rdfc bad proofValue", with(rdfc, "proof.proofValue", "uAAAA"), ErrMalformed},
		{"rdfc bad created", with(rdfc, "proof.created", "yesterday"), ErrMalformed},
		{"rdfc proof @context not a prefix", with(rdfc, "proof.@context", []any{vcV2}), ErrMalformed},
		{"protected term redefined", with(ed2020, "@context", []any{vcV1, vcV2}), ErrMalformed},
		{"invalid language tag", with(ed2020, "credentialSubject.delegation.status", map[string]any{"@value": "x", "@language": "not a tag"}), ErrMalformed},
		{"too large", append(append([]byte(`{"x":"`), make([]byte, maxDocumentSize)...), '"', '}'), ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := v.Verify(context.Background(), tc.raw, ed.key)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			t.Log(err)
			checkResult(t, err)
		})
	}
}

// TestRepeatedMembers: a member name repeated anywhere in the credential
// or in its JWS header is refused before JSON-LD processing, even where
// the signature covers it.
func TestRepeatedMembers(t *testing.T) {
	noNetwork(t)
	v := newVerifier(t)
	loader := signerLoader(t, nil)
	ed := newKey(t, didresolver.Ed25519)
	ed2020 := mustJSON(t, signLD(t, loader, delegation("did:key:issuer"), TypeEd25519Signature2020, algEdDSA, ed))
	jws := signLD(t, loader, delegation("did:key:issuer"), TypeEd25519Signature2018, algEdDSA, ed)
	if err := v.Verify(context.Background(), ed2020, ed.key); err != nil {
		t.Fatalf("precondition: %v", err)
	}
	// insert puts text after marker, or after the opening brace.
	insert := func(raw []byte, marker, text string) []byte {
		i := 1
		if marker != "" {
			if bytes.Count(raw, []byte(marker)) != 1 {
				t.Fatalf("marker %s not found once", marker)
			}
			i = bytes.Index(raw, []byte(marker)) + len(marker)
		}
		return append(append(append([]byte(nil), raw[:i]...), text...), raw[i:]...)
	}
	header := b64url.EncodeToString([]byte(`{"alg":"EdDSA","b64":false,"crit":["b64"],"\u0061lg":"none"}`))
	for name, raw := range map[string][]byte{
		"top level":                   insert(ed2020, "", `"issuer":"did:key:other",`),
		"case-folded, in the subject": insert(ed2020, `"credentialSubject":{`, `"ID":"did:key:other",`),
		"Kelvin sign, in the proof":   insert(ed2020, `"proof":{`, `"\u212aey":1,"key":2,`),
		"JWS header": func() []byte {
			c := copyMap(jws)
			set(c, "proof.jws", header+"..AA")
			return mustJSON(t, c)
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			err := v.Verify(context.Background(), raw, ed.key)
			if !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrRepeatedMember) {
				t.Fatalf("err = %v, want ErrMalformed and ErrRepeatedMember", err)
			}
			checkResult(t, err)
		})
	}
}

// checkResult asserts what holds for every error: it wraps a sentinel and
// classifies through ProofErrorKind.
func checkResult(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n == 0 || (n > 1 && !errors.Is(err, ErrKeyType)) {
		t.Fatalf("error %q wraps %d sentinels", err, n)
	}
	var k interface{ ProofErrorKind() string }
	if !errors.As(err, &k) {
		t.Fatalf("error %q has no ProofErrorKind", err)
	}
}

// TestPoisonGraph: interlinked indistinguishable blank nodes, on which
// URDNA2015 takes exponential time, are refused before canonicalizing.
func TestPoisonGraph(t *testing.T) {
	v := newVerifier(t)
	ed := newKey(t, didresolver.Ed25519)
	for _, n := range []int{5, 9, 40} {
		nodes := []any{}
		for i := 0; i < n; i++ {
			var links []any
			for j := 0; j < n; j++ {
				if j != i {
					links = append(links, map[string]any{"id": "_:b" + strconv.Itoa(j)})
				}
			}
			nodes = append(nodes, map[string]any{"id": "_:b" + strconv.Itoa(i), "link": links})
		}
		doc := delegation("did:key:issuer")
		set(doc, "credentialSubject.delegation.graph", nodes)
		doc["proof"] = map[string]any{
			"type": TypeEd25519Signature2020, "created": created, "verificationMethod": ed.vm,
			"proofPurpose": "assertionMethod", "proofValue": "z" + base58.Encode(make([]byte, 64)),
		}
		// The refusal below is the assertion; the bound only turns the
		// exponential canonicalization it prevents (hours at n=40) into a
		// failure rather than a hang, far above any machine's load (-race
		// on two busy cores once took 3 s).
		start := time.Now()
		err := v.Verify(context.Background(), mustJSON(t, doc), ed.key)
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("n=%d took %v: canonicalized before refusing?", n, d)
		}
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "blank nodes") {
			t.Errorf("n=%d: err = %v, want ErrMalformed for blank nodes", n, err)
		}
	}
	// Identical siblings are indistinguishable too, but cheap: accepted.
	loader := signerLoader(t, nil)
	doc := delegation("did:key:issuer")
	var items []any
	for i := 0; i < 50; i++ {
		items = append(items, map[string]any{"kind": "same"})
	}
	set(doc, "credentialSubject.delegation.items", items)
	raw := mustJSON(t, signLD(t, loader, doc, TypeEd25519Signature2020, algEdDSA, ed))
	if err := v.Verify(context.Background(), raw, ed.key); err != nil {
		t.Errorf("identical siblings: %v", err)
	}
}

// TestConcurrent verifies from many goroutines with one Verifier (run
// with -race: the parsed contexts are shared).
func TestConcurrent(t *testing.T) {
	v := newVerifier(t)
	loader := signerLoader(t, nil)
	ed := newKey(t, didresolver.Ed25519)
	raws := [][]byte{
		mustJSON(t, signLD(t, loader, delegation("did:key:issuer"), TypeEd25519Signature2020, algEdDSA, ed)),
		mustJSON(t, signRdfc2022(t, loader, delegation("did:key:issuer"), ed)),
		readFile(t, "testdata/w3c-eddsa-rdfc-2022.json"),
	}
	keys := []didresolver.Key{ed.key, ed.key, multikeyEd25519(t, "z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2")}
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := v.Verify(context.Background(), raws[i%3], keys[i%3]); err != nil {
				errs <- fmt.Errorf("goroutine %d: %w", i, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCanceledContext(t *testing.T) {
	v := newVerifier(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	raw := readFile(t, "testdata/w3c-eddsa-rdfc-2022.json")
	if err := v.Verify(ctx, raw, didresolver.Key{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestEmbeddedContexts(t *testing.T) {
	urls := EmbeddedContexts()
	if len(urls) != len(embedded) {
		t.Fatalf("%d URLs", len(urls))
	}
	for _, u := range urls {
		var doc map[string]any
		if err := json.Unmarshal(readFile(t, "contexts/"+embedded[u]), &doc); err != nil || doc["@context"] == nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// TestJSONLDPanic: json-gold panics on a scalar under an @graph
// container; Verify turns that into ErrMalformed.
func TestJSONLDPanic(t *testing.T) {
	v := newVerifier(t, WithInlineContexts())
	raw := []byte(`{"@context": ["https://www.w3.org/ns/credentials/v2", {"a": {"@id": "https://example.com/a", "@container": "@graph"}}],
		"a": 5, "proof": {"type": "Ed25519Signature2020", "created": "2020-01-01T00:00:00Z", "proofValue": "z5HNuvc5WbWYsRRt97kXJ6SoKgb1tMwtkQND4pnobZE26JGnohdWVpzashF9d8FRzhzm8oYRSivKACTakeE4DzdHL"}}`)
	err := v.Verify(context.Background(), raw, newKey(t, didresolver.Ed25519).key)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
}
