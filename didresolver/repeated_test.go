package didresolver

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// replaceOnce replaces old, which must occur exactly once in s.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("%q found %d times", old, n)
	}
	return strings.Replace(s, old, new, 1)
}

// wantRepeated fails unless err is a refusal of kind for a repeated member.
func wantRepeated(t *testing.T, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) || !errors.Is(err, ErrRepeatedMember) {
		t.Fatalf("error = %v, want %v with ErrRepeatedMember", err, kind)
	}
	checkOneSentinel(t, err)
}

// A DID document that repeats a member name anywhere is invalid: which
// key, controller or relationship it gives would depend on the parser.
func TestParseDocumentRepeatedMembers(t *testing.T) {
	doc, _ := testDoc(t)
	if _, err := ParseDocument([]byte(doc)); err != nil {
		t.Fatalf("precondition: %v", err)
	}
	for _, tc := range []struct{ name, old, new string }{
		{"id at the top", `{
	  "@context"`, `{"id": "did:web:evil.example", "@context"`},
		{"verificationmethod beside verificationMethod", `"authentication": [`, `"verificationmethod": [], "authentication": [`},
		{"key of a verification method", `{"id": "#a", `, `{"id": "#a", "publicKeyMultibase": "z6MktDeZmp9n8K334seLnTYeKkePNmWRfSVhoighWct9zK74", `},
		{"Kelvin sign in a publicKeyJwk", `"kty": "RSA"`, `"\u212aty": "OKP", "kty": "RSA"`},
		{"id of an embedded method", `{"id": "#e", `, `{"id": "#e", "ID": "#a", `},
		{"in a service endpoint", `"serviceEndpoint": {"origins"`, `"serviceEndpoint": {"Origins": [], "origins"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDocument([]byte(replaceOnce(t, doc, tc.old, tc.new)))
			wantRepeated(t, err, ErrInvalidDocument)
		})
	}
}

// did:web: the fetched document is refused; did:jwk: the JWK the DID
// encodes is.
func TestResolveRepeatedMembers(t *testing.T) {
	ctx := context.Background()
	const did = "did:web:agent.example.com"
	doc := webDoc(did)
	ts, _ := tlsServer(t, serveDoc("/.well-known/did.json", doc))
	if _, err := testResolver(ts).Resolve(ctx, did); err != nil {
		t.Fatalf("precondition: %v", err)
	}
	ts.Config.Handler = serveDoc("/.well-known/did.json",
		replaceOnce(t, doc, `"type":`, `"publicKeyMultibase":"z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2","type":`))
	_, err := testResolver(ts).Resolve(ctx, did)
	wantRepeated(t, err, ErrInvalidDocument)

	pj, err := PublicJWK(mustGenerate(t, Ed25519))
	if err != nil {
		t.Fatal(err)
	}
	x := pj["x"].(string)
	enc := func(s string) string { return "did:jwk:" + base64.RawURLEncoding.EncodeToString([]byte(s)) }
	if _, err := New().Resolve(ctx, enc(`{"kty":"OKP","crv":"Ed25519","x":"`+x+`"}`)); err != nil {
		t.Fatalf("precondition: %v", err)
	}
	for name, jwk := range map[string]string{
		"x repeated": `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","X":"` + x + `"}`,
		"Kelvin kty": `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","\u212aty":"EC"}`,
		"exact use":  `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","use":"enc","use":"sig"}`,
		"nested":     `{"kty":"OKP","crv":"Ed25519","x":"` + x + `","ext":{"a":1,"a":2}}`,
	} {
		t.Run("did:jwk "+name, func(t *testing.T) {
			_, err := New().Resolve(ctx, enc(jwk))
			wantRepeated(t, err, ErrInvalidDID)
		})
	}
}
