package didresolver

import (
	"crypto/ed25519"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mr-tron/base58"
)

// testDoc returns a did:web document with keys #a (authentication and
// assertion), #b (assertion only), #c (listed nowhere), #e (embedded in
// authentication) plus one of an unsupported type (#rsa, in assertion).
func testDoc(t testing.TB) (doc string, keys map[string]ed25519.PublicKey) {
	t.Helper()
	keys = map[string]ed25519.PublicKey{}
	for _, n := range []string{"a", "b", "c", "e"} {
		keys[n] = mustGenerate(t, Ed25519).(ed25519.PublicKey)
	}
	mbk := func(n string) string {
		return "z" + base58.Encode(append([]byte{0xed, 0x01}, keys[n]...))
	}
	doc = `{
	  "@context": ["https://www.w3.org/ns/did/v1"],
	  "id": "did:web:example.com",
	  "verificationMethod": [
	    {"id": "#a", "type": "Ed25519VerificationKey2020", "controller": "did:web:example.com", "publicKeyMultibase": "` + mbk("a") + `"},
	    {"id": "did:web:example.com#b", "type": "Ed25519VerificationKey2018", "controller": "did:web:example.com", "publicKeyBase58": "` + base58.Encode(keys["b"]) + `"},
	    {"id": "did:web:example.com#c", "type": "Multikey", "controller": "did:web:example.com", "publicKeyMultibase": "` + mbk("c") + `"},
	    {"id": "did:web:example.com#rsa", "type": "RsaVerificationKey2018", "publicKeyJwk": {"kty": "RSA", "n": "AQAB", "e": "AQAB"}}
	  ],
	  "authentication": [
	    "did:web:example.com#a",
	    {"id": "#e", "type": "Ed25519VerificationKey2020", "controller": "did:web:example.com", "publicKeyMultibase": "` + mbk("e") + `"}
	  ],
	  "assertionMethod": ["#a", "#b", "#rsa"],
	  "service": [
	    {"id": "#mcp", "type": ["mcp-i", "JSON-RPC"], "serviceEndpoint": "https://example.com/api/mcp"},
	    {"id": "#multi", "type": "LinkedDomains", "serviceEndpoint": {"origins": ["https://a.example", "https://b.example"], "alt": "https://c.example"}},
	    {"id": "#list", "type": "X", "serviceEndpoint": ["https://d.example", {"uri": "https://e.example"}]}
	  ]
	}`
	return doc, keys
}

func TestDocumentKey(t *testing.T) {
	raw, keys := testDoc(t)
	doc, err := ParseDocument([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		kid  string
		rel  Relationship
		want string // key name, or "" on error
		err  error
	}{
		{"did:web:example.com#a", Authentication, "a", nil},
		{"#a", AssertionMethod, "a", nil},
		{"#b", AssertionMethod, "b", nil},
		{"#b", Authentication, "", ErrKeyNotAuthorized},
		{"#c", AssertionMethod, "", ErrKeyNotAuthorized},
		{"#e", Authentication, "e", nil},
		{"#e", AssertionMethod, "", ErrKeyNotAuthorized},
		{"#rsa", AssertionMethod, "", ErrUnsupportedKey},
		{"#zzz", Authentication, "", ErrKeyNotFound},
		{"did:web:other.example#a", Authentication, "", ErrKeyNotFound},
		{"did:web:example.com", Authentication, "", ErrKeyNotFound},
		{"a", Authentication, "", ErrKeyNotFound},
		{"#a", "capabilityInvocation", "", ErrKeyNotAuthorized},
	}
	for _, tc := range tests {
		t.Run(tc.kid+"/"+string(tc.rel), func(t *testing.T) {
			k, err := doc.Key(tc.kid, tc.rel)
			wantErr(t, err, tc.err)
			checkOneSentinel(t, err)
			if tc.want == "" {
				return
			}
			if !keys[tc.want].Equal(k.Public) {
				t.Fatalf("got wrong key")
			}
			if !strings.HasPrefix(k.ID, "did:web:example.com#") {
				t.Fatalf("key id %q not absolute", k.ID)
			}
		})
	}

	ids := func(ks []Key) []string {
		var out []string
		for _, k := range ks {
			out = append(out, k.ID)
		}
		return out
	}
	if got := ids(doc.Keys(Authentication)); !reflect.DeepEqual(got, []string{"did:web:example.com#a", "did:web:example.com#e"}) {
		t.Fatalf("Keys(authentication) = %v", got)
	}
	// #rsa is listed but unusable, so it is skipped.
	if got := ids(doc.Keys(AssertionMethod)); !reflect.DeepEqual(got, []string{"did:web:example.com#a", "did:web:example.com#b"}) {
		t.Fatalf("Keys(assertionMethod) = %v", got)
	}

	if got := doc.Service[0].Types(); !reflect.DeepEqual(got, []string{"mcp-i", "JSON-RPC"}) {
		t.Fatalf("Types = %v", got)
	}
	if got := doc.Service[1].Types(); !reflect.DeepEqual(got, []string{"LinkedDomains"}) {
		t.Fatalf("Types = %v", got)
	}
	for i, want := range [][]string{
		{"https://example.com/api/mcp"},
		{"https://c.example", "https://a.example", "https://b.example"},
		{"https://d.example", "https://e.example"},
	} {
		if got := doc.Service[i].Endpoints(); !reflect.DeepEqual(got, want) {
			t.Fatalf("Endpoints[%d] = %v, want %v", i, got, want)
		}
	}
}

func TestMethodRefJSON(t *testing.T) {
	raw, _ := testDoc(t)
	doc, err := ParseDocument([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if doc.Authentication[0].Ref != "did:web:example.com#a" || doc.Authentication[0].Embedded != nil {
		t.Fatalf("string ref: %+v", doc.Authentication[0])
	}
	if doc.Authentication[1].Embedded == nil || doc.Authentication[1].Embedded.ID != "#e" {
		t.Fatalf("embedded ref: %+v", doc.Authentication[1])
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseDocument(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(doc, again) {
		t.Fatalf("round trip differs:\n%s", out)
	}
	var probe struct {
		Authentication []json.RawMessage `json:"authentication"`
	}
	if err := json.Unmarshal(out, &probe); err != nil {
		t.Fatal(err)
	}
	if probe.Authentication[0][0] != '"' || probe.Authentication[1][0] != '{' {
		t.Fatalf("marshalled refs: %s", out)
	}
}

func TestParseDocumentInvalid(t *testing.T) {
	vm := `{"id":"#k","type":"Multikey","publicKeyMultibase":"z6MkiupQ1QPitvNtmEwCb47mkfCtCoU9A6znu7ECSqyFbVXH"}`
	tests := map[string]string{
		"empty":                     ``,
		"not json":                  `not json`,
		"truncated":                 `{"id":"did:web:example.com"`,
		"array":                     `[]`,
		"string":                    `"did:web:example.com"`,
		"trailing data":             `{"id":"did:web:example.com"} {}`,
		"missing id":                `{"verificationMethod":[]}`,
		"empty id":                  `{"id":""}`,
		"id not string":             `{"id":42}`,
		"id not a DID":              `{"id":"https://example.com"}`,
		"id with fragment":          `{"id":"did:web:example.com#x"}`,
		"vm not array":              `{"id":"did:web:example.com","verificationMethod":{}}`,
		"vm entry string":           `{"id":"did:web:example.com","verificationMethod":["#k"]}`,
		"vm without id":             `{"id":"did:web:example.com","verificationMethod":[{"type":"Multikey"}]}`,
		"vm id without fragment":    `{"id":"did:web:example.com","verificationMethod":[{"id":"did:web:example.com","type":"Multikey"}]}`,
		"vm relative non-fragment":  `{"id":"did:web:example.com","verificationMethod":[{"id":"k","type":"Multikey"}]}`,
		"vm without type":           `{"id":"did:web:example.com","verificationMethod":[{"id":"#k"}]}`,
		"vm type not string":        `{"id":"did:web:example.com","verificationMethod":[{"id":"#k","type":["Multikey"]}]}`,
		"jwk not object":            `{"id":"did:web:example.com","verificationMethod":[{"id":"#k","type":"JsonWebKey2020","publicKeyJwk":"eyJ"}]}`,
		"multibase not string":      `{"id":"did:web:example.com","verificationMethod":[{"id":"#k","type":"Multikey","publicKeyMultibase":7}]}`,
		"duplicate vm id":           `{"id":"did:web:example.com","verificationMethod":[` + vm + `,` + strings.Replace(vm, "#k", "did:web:example.com#k", 1) + `]}`,
		"embedded shadows vm":       `{"id":"did:web:example.com","verificationMethod":[` + vm + `],"authentication":[{"id":"#k","type":"Multikey","publicKeyMultibase":"z6MktDeZmp9n8K334seLnTYeKkePNmWRfSVhoighWct9zK74"}]}`,
		"auth not array":            `{"id":"did:web:example.com","authentication":"#k"}`,
		"auth entry number":         `{"id":"did:web:example.com","authentication":[1]}`,
		"auth entry null":           `{"id":"did:web:example.com","authentication":[null]}`,
		"auth ref invalid":          `{"id":"did:web:example.com","authentication":["k 1"]}`,
		"embedded without type":     `{"id":"did:web:example.com","assertionMethod":[{"id":"#k"}]}`,
		"service type number":       `{"id":"did:web:example.com","service":[{"id":"#s","type":1,"serviceEndpoint":"https://x"}]}`,
		"service type empty list":   `{"id":"did:web:example.com","service":[{"id":"#s","type":[],"serviceEndpoint":"https://x"}]}`,
		"service without id":        `{"id":"did:web:example.com","service":[{"type":"X","serviceEndpoint":"https://x"}]}`,
		"service endpoint number":   `{"id":"did:web:example.com","service":[{"id":"#s","type":"X","serviceEndpoint":5}]}`,
		"service endpoint missing":  `{"id":"did:web:example.com","service":[{"id":"#s","type":"X"}]}`,
		"service endpoint bad list": `{"id":"did:web:example.com","service":[{"id":"#s","type":"X","serviceEndpoint":[1]}]}`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			doc, err := ParseDocument([]byte(in))
			wantErr(t, err, ErrInvalidDocument)
			checkOneSentinel(t, err)
			if doc != nil {
				t.Fatal("document returned with error")
			}
		})
	}
}

// Errors must not echo document content: it is attacker-controlled and
// ends up in logs and HTTP error messages.
func TestParseDocumentErrorHasNoBody(t *testing.T) {
	for _, in := range []string{
		`{"id":"SECRET-MARKER"}`,
		`{"id":"did:web:example.com","verificationMethod":[{"id":"#k","type":"SECRET-MARKER"}],"authentication":[{"id":"#k","type":"x"}]}`,
		`{"id":"did:web:example.com","service":SECRET-MARKER}`,
		`{"id":"did:web:example.com","verificationMethod":"SECRET-MARKER"}`,
	} {
		_, err := ParseDocument([]byte(in))
		if err == nil || strings.Contains(err.Error(), "SECRET-MARKER") {
			t.Fatalf("error %v", err)
		}
	}
}

func TestVerificationMethodPublicKey(t *testing.T) {
	ed := mustGenerate(t, Ed25519).(ed25519.PublicKey)
	other := mustGenerate(t, Ed25519).(ed25519.PublicKey)
	k1 := mustGenerate(t, Secp256k1)
	p256 := mustGenerate(t, P256)
	mbOf := func(pub any) string { s, _ := encodeMultibaseKey(pub); return s }
	jwkOf := func(pub any) map[string]any { m, _ := PublicJWK(pub); return m }
	k1Compressed, _ := k1.(interface{ SerializeCompressed() []byte })
	tests := []struct {
		name string
		vm   VerificationMethod
		want any
		err  error
	}{
		{"multibase 2020", VerificationMethod{Type: "Ed25519VerificationKey2020", PublicKeyMultibase: mbOf(ed)}, ed, nil},
		{"raw multibase 2020", VerificationMethod{Type: "Ed25519VerificationKey2020", PublicKeyMultibase: "z" + base58.Encode(ed)}, ed, nil},
		{"base58 2018", VerificationMethod{Type: "Ed25519VerificationKey2018", PublicKeyBase58: base58.Encode(ed)}, ed, nil},
		{"multikey secp256k1", VerificationMethod{Type: "Multikey", PublicKeyMultibase: mbOf(k1)}, k1, nil},
		{"multikey p256", VerificationMethod{Type: "Multikey", PublicKeyMultibase: mbOf(p256)}, p256, nil},
		{"jwk p256", VerificationMethod{Type: "JsonWebKey2020", PublicKeyJwk: jwkOf(p256)}, p256, nil},
		{"jwk secp256k1 2019", VerificationMethod{Type: "EcdsaSecp256k1VerificationKey2019", PublicKeyJwk: jwkOf(k1)}, k1, nil},
		{"base58 secp256k1 2019", VerificationMethod{Type: "EcdsaSecp256k1VerificationKey2019", PublicKeyBase58: base58.Encode(k1Compressed.SerializeCompressed())}, k1, nil},
		{"jwk and multibase agree", VerificationMethod{Type: "Ed25519VerificationKey2020", PublicKeyJwk: jwkOf(ed), PublicKeyMultibase: mbOf(ed)}, ed, nil},
		{"jwk and multibase disagree", VerificationMethod{Type: "Ed25519VerificationKey2020", PublicKeyJwk: jwkOf(ed), PublicKeyMultibase: mbOf(other)}, nil, ErrUnsupportedKey},
		{"no material", VerificationMethod{Type: "Multikey"}, nil, ErrUnsupportedKey},
		{"type says ed25519, key is p256", VerificationMethod{Type: "Ed25519VerificationKey2020", PublicKeyJwk: jwkOf(p256)}, nil, ErrUnsupportedKey},
		{"type says secp256k1, key is ed25519", VerificationMethod{Type: "EcdsaSecp256k1VerificationKey2019", PublicKeyMultibase: mbOf(ed)}, nil, ErrUnsupportedKey},
		{"base58 with multikey", VerificationMethod{Type: "Multikey", PublicKeyBase58: base58.Encode(ed)}, nil, ErrUnsupportedKey},
		{"base58 invalid", VerificationMethod{Type: "Ed25519VerificationKey2018", PublicKeyBase58: "0OIl"}, nil, ErrUnsupportedKey},
		{"base58 short", VerificationMethod{Type: "Ed25519VerificationKey2018", PublicKeyBase58: base58.Encode(ed[:31])}, nil, ErrUnsupportedKey},
		{"multibase not z", VerificationMethod{Type: "Multikey", PublicKeyMultibase: "u" + "AAAA"}, nil, ErrUnsupportedKey},
		{"multibase raw with multikey", VerificationMethod{Type: "Multikey", PublicKeyMultibase: "z" + base58.Encode(ed)}, nil, ErrUnsupportedKey},
		{"jwk with d", VerificationMethod{Type: "JsonWebKey2020", PublicKeyJwk: map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(ed), "d": b64(ed)}}, nil, ErrUnsupportedKey},
		{"jwk x wrong type", VerificationMethod{Type: "JsonWebKey2020", PublicKeyJwk: map[string]any{"kty": "OKP", "crv": "Ed25519", "x": 1.5}}, nil, ErrUnsupportedKey},
		{"jwk rsa", VerificationMethod{Type: "JsonWebKey2020", PublicKeyJwk: map[string]any{"kty": "RSA", "n": "AQAB", "e": "AQAB"}}, nil, ErrUnsupportedKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.vm.PublicKey()
			wantErr(t, err, tc.err)
			checkOneSentinel(t, err)
			if tc.want != nil && !samePublicKey(tc.want, got) {
				t.Fatalf("wrong key")
			}
		})
	}
}
