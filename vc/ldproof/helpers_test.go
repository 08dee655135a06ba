package ldproof

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/hyperledger/aries-framework-go/component/models/ld/processor"
	"github.com/hyperledger/aries-framework-go/component/models/ld/proof"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mr-tron/base58"
	"github.com/piprate/json-gold/ld"
)

// Test-only contexts (testdata/SOURCES.md).
var testContexts = map[string]string{
	"https://www.w3.org/2018/credentials/examples/v1": "testdata/credentials-examples-v1.jsonld",
	"https://www.w3.org/ns/credentials/examples/v2":   "testdata/credentials-examples-v2.jsonld",
	"https://www.w3.org/ns/odrl.jsonld":               "testdata/odrl.jsonld",
}

const (
	kyaContext = "https://schema.kya-os.org/v1/protocol/delegation/context/v1.0.0"
	vcV1       = "https://www.w3.org/2018/credentials/v1"
	vcV2       = "https://www.w3.org/ns/credentials/v2"
	created    = "2026-01-01T00:00:00Z"
)

func testOptions() []Option {
	var opts []Option
	for u, f := range testContexts {
		opts = append(opts, WithContextFile(u, f))
	}
	return opts
}

func newVerifier(t testing.TB, extra ...Option) *Verifier {
	t.Helper()
	v, err := New(append(testOptions(), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// noNetwork makes any use of http.DefaultTransport fail the test.
func noNetwork(t *testing.T) {
	t.Helper()
	orig := http.DefaultTransport
	http.DefaultTransport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("network access to %s", r.URL)
		return nil, errors.New("no network in tests")
	})
	t.Cleanup(func() { http.DefaultTransport = orig })
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// mapLoader serves the embedded and test contexts to the test signer,
// independently of the Verifier's loader.
type mapLoader map[string]any

func (m mapLoader) LoadDocument(u string) (*ld.RemoteDocument, error) {
	d, ok := m[u]
	if !ok {
		return nil, errors.New("test loader: unknown context " + u)
	}
	return &ld.RemoteDocument{DocumentURL: u, Document: d}, nil
}

func signerLoader(t testing.TB, extra map[string][]byte) mapLoader {
	t.Helper()
	m := mapLoader{}
	add := func(u string, b []byte) {
		var d any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		m[u] = d
	}
	for u, f := range embedded {
		b, err := os.ReadFile("contexts/" + f)
		if err != nil {
			t.Fatal(err)
		}
		add(u, b)
	}
	for u, f := range testContexts {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		add(u, b)
	}
	for u, b := range extra {
		add(u, b)
	}
	return m
}

// ariesSuite canonicalizes with aries' own JSON-LD processor, so the
// signer does not share the Verifier's canonicalization code.
type ariesSuite struct{ loader ld.DocumentLoader }

func (s ariesSuite) GetCanonicalDocument(doc map[string]any, opts ...processor.Opts) ([]byte, error) {
	return processor.Default().GetCanonicalDocument(doc, append(opts, processor.WithDocumentLoader(s.loader))...)
}

func (ariesSuite) GetDigest(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

func (ariesSuite) CompactProof() bool { return false }

type testKey struct {
	priv crypto.PrivateKey
	key  didresolver.Key
	vm   string
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
	_, kid, err := didresolver.KeyDID(pub)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{priv: priv, key: didresolver.Key{ID: kid, Public: pub}, vm: kid}
}

func signRaw(t testing.TB, alg string, priv crypto.PrivateKey, msg []byte) []byte {
	t.Helper()
	switch alg {
	case algEdDSA:
		return ed25519.Sign(priv.(ed25519.PrivateKey), msg)
	case algES256:
		h := sha256.Sum256(msg)
		r, s, err := ecdsa.Sign(rand.Reader, priv.(*ecdsa.PrivateKey), h[:])
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		s.FillBytes(out[32:])
		return out
	case algES256K:
		h := sha256.Sum256(msg)
		sig := secpecdsa.Sign(priv.(*secp256k1.PrivateKey), h[:])
		r, s := sig.R(), sig.S()
		rb, sb := r.Bytes(), s.Bytes()
		return append(rb[:], sb[:]...)
	}
	t.Fatalf("alg %s", alg)
	return nil
}

// signLD adds a Linked Data Signatures proof of type typ to doc, with the
// verify data built by aries' ld/proof over aries' canonicalization. For
// a JWS suite alg names the JWS algorithm.
func signLD(t testing.TB, loader ld.DocumentLoader, doc map[string]any, typ, alg string, k testKey) map[string]any {
	t.Helper()
	pf := map[string]any{
		"type":               typ,
		"created":            created,
		"verificationMethod": k.vm,
		"proofPurpose":       "assertionMethod",
	}
	jws := typ != TypeEd25519Signature2020
	var hdr string
	if jws {
		hdr = proof.CreateDetachedJWTHeader(alg)
		pf["jws"] = hdr + "..AA"
	} else {
		pf["proofValue"] = "z" + base58.Encode(make([]byte, 64))
	}
	p, err := proof.NewProof(pf)
	if err != nil {
		t.Fatal(err)
	}
	unsigned := copyMap(doc)
	delete(unsigned, "proof")
	data, err := proof.CreateVerifyData(ariesSuite{loader}, unsigned, p)
	if err != nil {
		t.Fatal(err)
	}
	sig := signRaw(t, alg, k.priv, data)
	if jws {
		pf["jws"] = hdr + ".." + base64.RawURLEncoding.EncodeToString(sig)
	} else {
		pf["proofValue"] = "z" + base58.Encode(sig)
	}
	out := copyMap(unsigned)
	out["proof"] = pf
	return out
}

// signRdfc2022 adds an eddsa-rdfc-2022 DataIntegrityProof, computed as
// vc-di-eddsa §3.4 says, with aries' canonicalization.
func signRdfc2022(t testing.TB, loader ld.DocumentLoader, doc map[string]any, k testKey) map[string]any {
	t.Helper()
	s := ariesSuite{loader}
	unsigned := copyMap(doc)
	delete(unsigned, "proof")
	pf := map[string]any{
		"type":               TypeDataIntegrityProof,
		"cryptosuite":        CryptosuiteEddsaRdfc2022,
		"created":            created,
		"verificationMethod": k.vm,
		"proofPurpose":       "assertionMethod",
	}
	cfg := copyMap(pf)
	cfg["@context"] = unsigned["@context"]
	pc, err := s.GetCanonicalDocument(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := s.GetCanonicalDocument(copyMap(unsigned))
	if err != nil {
		t.Fatal(err)
	}
	sig := ed25519.Sign(k.priv.(ed25519.PrivateKey), append(s.GetDigest(pc), s.GetDigest(dc)...))
	pf["proofValue"] = "z" + base58.Encode(sig)
	out := copyMap(unsigned)
	out["proof"] = pf
	return out
}

// delegation is a KYA-OS DelegationCredential in the VC 1.1 form.
func delegation(issuer string) map[string]any {
	return map[string]any{
		"@context":       []any{vcV1, kyaContext},
		"id":             "urn:uuid:3f0c0000-0000-4000-8000-000000000001",
		"type":           []any{"VerifiableCredential", "DelegationCredential"},
		"issuer":         issuer,
		"issuanceDate":   "2026-01-01T00:00:00Z",
		"expirationDate": "2027-01-01T00:00:00Z",
		"credentialSubject": map[string]any{
			"id": "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
			"delegation": map[string]any{
				"id":         "urn:uuid:3f0c0000-0000-4000-8000-000000000002",
				"issuerDid":  issuer,
				"subjectDid": "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
				"scopes":     []any{"greeting:read", "greeting:write"},
				"constraints": map[string]any{
					"scopes":   []any{"greeting:read"},
					"audience": "did:web:mcp.example.com",
					"notAfter": 1798761600,
				},
				"status":    "active",
				"createdAt": 1767225600000,
			},
		},
	}
}

func copyMap(m map[string]any) map[string]any {
	var out map[string]any
	b, _ := json.Marshal(m)
	_ = json.Unmarshal(b, &out)
	return out
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// set sets a member at a dotted path.
func set(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		m = m[p].(map[string]any)
	}
	if v == nil {
		delete(m, parts[len(parts)-1])
		return
	}
	m[parts[len(parts)-1]] = v
}

// multikeyEd25519 decodes a z6Mk… multibase Ed25519 public key.
func multikeyEd25519(t testing.TB, mb string) didresolver.Key {
	t.Helper()
	b, err := base58.Decode(mb[1:])
	if err != nil || len(b) != 34 || b[0] != 0xed || b[1] != 0x01 {
		t.Fatalf("bad multikey %s", mb)
	}
	return didresolver.Key{Public: ed25519.PublicKey(b[2:])}
}

func base58Ed25519(t testing.TB, s string) didresolver.Key {
	t.Helper()
	b, err := base58.Decode(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		t.Fatalf("bad base58 key %s", s)
	}
	return didresolver.Key{Public: ed25519.PublicKey(b)}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
