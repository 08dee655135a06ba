package vc

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mr-tron/base58"
)

// fixedNow is the clock of every test that mints its own credentials.
var fixedNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const serverDID = "did:web:server.example.com"

// mapResolver is a real document-based resolver over documents built in
// the test (or parsed from the vectors).
type mapResolver map[string]*didresolver.Document

func (m mapResolver) Resolve(ctx context.Context, did string) (*didresolver.Document, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d, ok := m[did]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w: no document", didresolver.ErrNotFound)
}

type testKey struct {
	priv     crypto.PrivateKey
	pub      crypto.PublicKey
	did, kid string
}

func newKey(t testing.TB, kt didresolver.KeyType) testKey {
	t.Helper()
	priv, err := didresolver.GenerateKey(kt)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := didresolver.PublicKeyOf(priv)
	if err != nil {
		t.Fatal(err)
	}
	did, kid, err := didresolver.KeyDID(pub)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{priv: priv, pub: pub, did: did, kid: kid}
}

// method is a verification method of a test document.
type method struct {
	id  string
	pub crypto.PublicKey
}

// document builds a DID document for did with the methods in assert listed
// under assertionMethod and those in authOnly only under authentication.
func document(t testing.TB, did string, assert, authOnly []method) *didresolver.Document {
	t.Helper()
	doc := &didresolver.Document{ID: did}
	add := func(m method) {
		jwk, err := didresolver.PublicJWK(m.pub)
		if err != nil {
			t.Fatal(err)
		}
		doc.VerificationMethod = append(doc.VerificationMethod, didresolver.VerificationMethod{
			ID: m.id, Type: "JsonWebKey2020", Controller: did, PublicKeyJwk: jwk,
		})
		doc.Authentication = append(doc.Authentication, didresolver.MethodRef{Ref: m.id})
	}
	for _, m := range assert {
		add(m)
		doc.AssertionMethod = append(doc.AssertionMethod, didresolver.MethodRef{Ref: m.id})
	}
	for _, m := range authOnly {
		add(m)
	}
	// Round-trip through the parser so the documents are ones didresolver
	// accepts.
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := didresolver.ParseDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

// fixture holds issuers of each key type, an agent and a resolver knowing
// all of them.
type fixture struct {
	ed, p256, k1 testKey
	agent        testKey
	stranger     testKey // a key no document lists
	authOnly     testKey // listed in ed's document, only under authentication
	multi        testKey // a DID with two assertion keys: multi.kid and multi.did+"#second"
	second       testKey
	unresolvable testKey // a did:key the resolver does not know
	res          mapResolver
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{
		ed:           newKey(t, didresolver.Ed25519),
		p256:         newKey(t, didresolver.P256),
		k1:           newKey(t, didresolver.Secp256k1),
		agent:        newKey(t, didresolver.Ed25519),
		stranger:     newKey(t, didresolver.Ed25519),
		authOnly:     newKey(t, didresolver.Ed25519),
		multi:        newKey(t, didresolver.Ed25519),
		second:       newKey(t, didresolver.Ed25519),
		unresolvable: newKey(t, didresolver.Ed25519),
		res:          mapResolver{},
	}
	f.authOnly.did = f.ed.did
	f.authOnly.kid = f.ed.did + "#auth-only"
	f.second.did = f.multi.did
	f.second.kid = f.multi.did + "#second"
	for _, k := range []testKey{f.p256, f.k1, f.agent} {
		f.res[k.did] = document(t, k.did, []method{{k.kid, k.pub}}, nil)
	}
	f.res[f.ed.did] = document(t, f.ed.did, []method{{f.ed.kid, f.ed.pub}}, []method{{f.authOnly.kid, f.authOnly.pub}})
	f.res[f.multi.did] = document(t, f.multi.did, []method{{f.multi.kid, f.multi.pub}, {f.second.kid, f.second.pub}}, nil)
	return f
}

func (f *fixture) verifier(opts ...Option) *Verifier {
	return NewVerifier(f.res, append([]Option{WithClock(func() time.Time { return fixedNow })}, opts...)...)
}

// vc11Claims is a KYA-OS VC 1.1 VC-JWT payload issued by iss to the
// fixture's agent, valid around fixedNow, bound to serverDID.
func (f *fixture) vc11Claims(iss testKey) map[string]any {
	now := fixedNow
	return map[string]any{
		"iss": iss.did,
		"sub": f.agent.did,
		"iat": now.Add(-time.Minute).Unix(),
		"exp": now.Add(time.Hour).Unix(),
		"jti": "urn:uuid:3f0c0000-0000-4000-8000-000000000001",
		"vc": map[string]any{
			"@context": []any{
				"https://www.w3.org/2018/credentials/v1",
				"https://schema.kya-os.org/v1/protocol/delegation/context/v1.0.0",
			},
			"id":             "urn:uuid:3f0c0000-0000-4000-8000-000000000001",
			"type":           []any{"VerifiableCredential", "DelegationCredential"},
			"issuer":         iss.did,
			"issuanceDate":   now.Add(-time.Minute).Format(time.RFC3339Nano),
			"expirationDate": now.Add(time.Hour).Format(time.RFC3339Nano),
			"credentialSubject": map[string]any{
				"id": f.agent.did,
				"delegation": map[string]any{
					"id":         "3f0c0000-0000-4000-8000-000000000001",
					"issuerDid":  iss.did,
					"subjectDid": f.agent.did,
					"scopes":     []any{"greeting:read", "greeting:write"},
					"constraints": map[string]any{
						"scopes":   []any{"greeting:read", "greeting:write"},
						"audience": serverDID,
					},
					"status":    "active",
					"createdAt": now.Add(-time.Minute).UnixMilli(),
				},
			},
		},
	}
}

// vc20Payload is a vc+jwt payload: the VC itself.
func (f *fixture) vc20Payload(iss testKey) map[string]any {
	now := fixedNow
	return map[string]any{
		"@context":   []any{"https://www.w3.org/ns/credentials/v2"},
		"id":         "urn:uuid:vc20",
		"type":       []any{"VerifiableCredential", "DelegationCredential"},
		"issuer":     map[string]any{"id": iss.did, "name": "Alice"},
		"validFrom":  now.Add(-time.Minute).Format(time.RFC3339),
		"validUntil": now.Add(time.Hour).Format(time.RFC3339),
		"credentialSubject": map[string]any{
			"id":    f.agent.did,
			"scope": "files:read files:write",
			"constraints": map[string]any{
				"audience": []any{serverDID, "did:web:other.example.com"},
			},
		},
	}
}

// jsonCredential is an unsigned KYA-OS JSON credential.
func (f *fixture) jsonCredential(iss testKey) map[string]any {
	c := f.vc11Claims(iss)["vc"].(map[string]any)
	return c
}

// signedJSON returns a maker of the fixture's JSON credential by f.ed,
// changed by tweak (if not nil) and signed by sign.
func (f *fixture) signedJSON(tweak func(c map[string]any), sign func(t *testing.T, c map[string]any) []byte) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		c := f.jsonCredential(f.ed)
		if tweak != nil {
			tweak(c)
		}
		return sign(t, c)
	}
}

func header(alg, kid string) map[string]any {
	h := map[string]any{"alg": alg, "typ": "JWT"}
	if kid != "" {
		h["kid"] = kid
	}
	return h
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// mint signs a compact JWS over any header and claims; a nil key leaves
// the signature empty.
func mint(t testing.TB, key crypto.PrivateKey, hdr, claims map[string]any) []byte {
	t.Helper()
	input := b64(mustJSON(t, hdr)) + "." + b64(mustJSON(t, claims))
	var sig []byte
	if key != nil {
		var err error
		if sig, err = signJWS(key, []byte(input)); err != nil {
			t.Fatal(err)
		}
	}
	return []byte(input + "." + b64(sig))
}

// setPath sets (or, for v == del, deletes) a member at a dotted path.
func setPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		m = m[p].(map[string]any)
	}
	last := parts[len(parts)-1]
	if v == del {
		delete(m, last)
		return
	}
	m[last] = v
}

type deleteMarker struct{}

var del = deleteMarker{}

func jcsOf(t testing.TB, v any) []byte {
	t.Helper()
	b, err := jcs.Transform(mustJSON(t, v))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signEd25519JCS adds an MCP-I Ed25519Signature2020 proof; multibase
// selects "z"+base58btc over base64url.
func signEd25519JCS(t testing.TB, k testKey, cred map[string]any, multibase bool) []byte {
	t.Helper()
	sig := ed25519.Sign(k.priv.(ed25519.PrivateKey), jcsOf(t, cred))
	value := b64(sig)
	if multibase {
		value = "z" + base58.Encode(sig)
	}
	cred["proof"] = map[string]any{
		"type":               "Ed25519Signature2020",
		"created":            fixedNow.Format(time.RFC3339),
		"verificationMethod": k.kid,
		"proofPurpose":       "assertionMethod",
		"proofValue":         value,
	}
	return mustJSON(t, cred)
}

// signEddsaJCS2022 adds a DataIntegrityProof with cryptosuite
// eddsa-jcs-2022, written from the W3C algorithm independently of the
// verifier: proofConfig is the proof options with the document's @context,
// hashData = SHA-256(JCS(proofConfig)) || SHA-256(JCS(document)). A
// non-nil proofContext is put in the proof, and then (the spec's Verify
// Proof step) it is also the @context the document is hashed with.
func signEddsaJCS2022(t testing.TB, k testKey, cred map[string]any, proofContext []any) []byte {
	t.Helper()
	proof := map[string]any{
		"type":               "DataIntegrityProof",
		"cryptosuite":        "eddsa-jcs-2022",
		"created":            fixedNow.Format(time.RFC3339),
		"verificationMethod": k.kid,
		"proofPurpose":       "assertionMethod",
	}
	doc := map[string]any{}
	for key, v := range cred {
		doc[key] = v
	}
	if proofContext != nil {
		proof["@context"] = proofContext
		doc["@context"] = proofContext
	}
	config := map[string]any{}
	for key, v := range proof {
		config[key] = v
	}
	config["@context"] = doc["@context"]
	ch := sha256.Sum256(jcsOf(t, config))
	dh := sha256.Sum256(jcsOf(t, doc))
	sig := ed25519.Sign(k.priv.(ed25519.PrivateKey), append(ch[:], dh[:]...))
	proof["proofValue"] = "z" + base58.Encode(sig)
	cred["proof"] = proof
	return mustJSON(t, cred)
}

// decodeJSON is the inverse of mustJSON for tweaking issued credentials.
func decodeJSON(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
