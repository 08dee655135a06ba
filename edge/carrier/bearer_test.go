package carrier

import (
	"encoding/base64"
	"strings"
	"testing"
)

// earlyCases are payloads longer than a short prefix on which reading the
// start first (markedEarly) could go wrong: a credential claim before,
// across and after the cut, nested or in a string rather than a member,
// escaped or case-folded, and followed by something that is not JSON or
// not base64url. Each is tried with every cut (isDelegationJWTWithin).
var earlyCases = []string{
	`{"iss":"did:key:z6Mk","sub":"did:key:z6Mk","vc":{"type":["VerifiableCredential"]}}`,
	`{"iss":"did:key:z6Mk","sub":"did:key:z6Mk","vc":{"type":["VerifiableCredential"]}`,
	`{"iss":"did:key:z6Mk","sub":"did:key:z6Mk","vc":{"type":["VerifiableCredential"]}}x`,
	`{"iss":"did:key:z6Mk","sub":"did:key:z6Mk","vc":NaN,"padding":"xxxxxxxxxxxxxxxxxxxx"}`,
	`{"iss":"did:key:z6Mk","sub":"did:key:z6Mk","VC":{},"padding":"xxxxxxxxxxxxxxxxxxxxxxx"}`,
	`{"iss":"did:key:z6Mk","sub":"did:key:z6Mk","v\u0063":1,"padding":"xxxxxxxxxxxxxxxxxxxxx"}`,
	`{"iss":"did:key:z6Mk","sub":"did:key:z6Mk","\u0040context":[],"padding":"xxxxxxxxxxxxxxx"}`,
	`{"iss":"did:key:z6Mk","sub":"did:key:z6Mk","vp":null,"padding":"xxxxxxxxxxxxxxxxxxxxxxx"}`,
	`{"iss":"did:key:z6Mk","sub":{"vc":1},"scope":"read write","padding":"xxxxxxxxxxxxxxxxxxxx"}`,
	`{"iss":"did:key:z6Mk","sub":["vc",{"vp":2}],"scope":"read write","padding":"xxxxxxxxxxxxx"}`,
	`{"iss":"\"vc\":1,","sub":"alice","scope":"read write","padding":"xxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	`{"iss":"did:key:z6Mk","sub":"alice","scope":"read write","padding":"xxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	`{"iss":"did:key:z6Mk","sub":"alice","scope":"read write","vcx":1,"padding":"xxxxxxxxxxxxxxxxx"}`,
	`{"iss":"did:key:z6Mk","exp":1712345678,"sub":"alice","scope":"read","vc":1,"padding":"xxxxxx"}`,
	`{"iss":"did:key:z6Mk","exp":1712345678 ,"vc":1,"n":1e5,"t":true,"f":false,"z":null,"a":[1,2]}`,
	`{"iss":"did:key:z6Mk","sub":"did:key:z6Mk","aud":["a","b"],"vc":{},"vc":{},"x":"yyyyyyyyyy"}`,
	`[{"vc":1},{"vc":2},{"vc":3},{"vc":4},{"vc":5},{"vc":6},{"vc":7},{"vc":8},{"vc":9}]`,
	`  {"vc":1,  "padding":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	"\xef\xbb\xbf" + `{"vc":1,"padding":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	`{"iss":"did:key:z6Mk","iss":"did:key:z6Mk","sub":"alice","scope":"read","padding":"xxxxxxx"}`,
	`{"a":{"b":{"c":{"d":{"e":[[[[[[1]]]]]]}}}},"vc":1,"padding":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	"{\"a\":\"\xff\xfe\",\"vc\":1,\"padding\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
	"{\"a\":\"\x01\",\"vc\":1,\"padding\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
}

// Reading the start of a payload first gives the verdict of the whole
// token, wherever the cut falls: the same as without the shortcut and as
// encoding/json (isDelegationJWTRef), for headers that leave the payload to
// decide.
func TestIsDelegationJWTEarlyAgrees(t *testing.T) {
	e := base64.RawURLEncoding.EncodeToString
	for _, header := range []string{`{"alg":"EdDSA","typ":"JWT"}`, `{"alg":"RS256"}`} {
		for _, payload := range earlyCases {
			for _, tok := range earlyTokens(e([]byte(header)), e([]byte(payload))) {
				want := isDelegationJWTRef(tok)
				for prefix := 0; prefix <= len(tok); prefix++ {
					if got := isDelegationJWTWithin(tok, prefix); got != want {
						t.Errorf("isDelegationJWTWithin(%q, %d) = %v, decoding says %v", tok, prefix, got, want)
					}
				}
			}
		}
	}
}

// earlyTokens are tokens of a header and payload segment, as they are and
// with the payload's tail broken where only the whole decoding sees it:
// padding, a line break (which the decoder would skip), a letter outside
// base64url, trailing bits that are not zero.
func earlyTokens(h, p string) []string {
	toks := []string{h + "." + p + ".c2ln"}
	for _, tail := range []string{"=", "\n", "+", "B"} {
		toks = append(toks, h+"."+p+tail+".c2ln")
	}
	return toks
}

// A real delegation's vc member lies within earlyPrefix, so that the
// shortcut serves KYA-OS credentials; and the shortcut alone finds it.
func TestMarkedEarlyFindsKYAOSClaims(t *testing.T) {
	claims := `{"iss":"did:key:z6MkshbrFcsGztN9qUhYkbQGM3iZyX1Yw4MYQ7c4NztAZEzE",` +
		`"sub":"did:key:z6MkrWsbycoQ21VCuWkHzHdjB1r36KhxDTSiXULBrBqqcQbj",` +
		`"aud":["did:web:mcp.example.com","https://mcp.example.com/mcp","https://other.example.com"],` +
		`"nbf":1795714087,"iat":1795714147,"exp":1795717747,"jti":"urn:uuid:0b6c2b5e-6d3e-4d43-9b6b-1d6c7b0c1a11",` +
		`"vc":{"@context":["https://www.w3.org/2018/credentials/v1"],"type":["VerifiableCredential","DelegationCredential"],` +
		`"credentialSubject":{"id":"did:key:z6MkrWsbycoQ21VCuWkHzHdjB1r36KhxDTSiXULBrBqqcQbj","padding":"` +
		strings.Repeat("x", 1000) + `"}}}`
	p := base64.RawURLEncoding.EncodeToString([]byte(claims))
	if len(p) <= earlyPrefix {
		t.Fatalf("payload of %d characters: not past the prefix", len(p))
	}
	var buf []byte
	if !markedEarly(&buf, p[:earlyPrefix]) {
		t.Error("the vc member within the prefix was not found")
	}
	if markedEarly(&buf, p[:200]) {
		t.Error("a cut before the vc member found it")
	}
}

// FuzzIsDelegationJWTEarly: reading a prefix first never changes the
// verdict, against both the whole reading (no shortcut) and encoding/json.
func FuzzIsDelegationJWTEarly(f *testing.F) {
	for _, p := range earlyCases {
		f.Add([]byte(`{"alg":"EdDSA","typ":"JWT"}`), []byte(p), uint16(40), "")
	}
	f.Add([]byte(`{}`), []byte(`{"vc":1}`), uint16(4), "e30.eyJ2YyI6MX0=.x")
	f.Fuzz(func(t *testing.T, header, payload []byte, prefix uint16, tail string) {
		e := base64.RawURLEncoding.EncodeToString
		tok := e(header) + "." + e(payload) + tail + ".c2ln"
		want := isDelegationJWTRef(tok)
		if whole := isDelegationJWTWithin(tok, len(tok)); whole != want {
			t.Fatalf("isDelegationJWTWithin(%q, whole) = %v, decoding says %v", tok, whole, want)
		}
		if got := isDelegationJWTWithin(tok, int(prefix)); got != want {
			t.Errorf("isDelegationJWTWithin(%q, %d) = %v, decoding says %v", tok, prefix, got, want)
		}
	})
}

// BenchmarkIsDelegationJWT: recognizing a fresh KYA-OS delegation (not yet
// in the bearer memo), with and without reading the start first.
func BenchmarkIsDelegationJWT(b *testing.B) {
	claims := `{"iss":"did:key:z6MkshbrFcsGztN9qUhYkbQGM3iZyX1Yw4MYQ7c4NztAZEzE",` +
		`"sub":"did:key:z6MkrWsbycoQ21VCuWkHzHdjB1r36KhxDTSiXULBrBqqcQbj","aud":"https://mcp.example.com",` +
		`"nbf":1795714087,"iat":1795714147,"exp":1795717747,"jti":"urn:uuid:0b6c2b5e-6d3e-4d43-9b6b-1d6c7b0c1a11",` +
		`"vc":{"@context":["https://www.w3.org/2018/credentials/v1"],"padding":"` + strings.Repeat("x", 900) + `"}}`
	tok := fakeJWT(`{"alg":"EdDSA","typ":"JWT","kid":"did:key:z6MkshbrFcsGztN9qUhYkbQGM3iZyX1Yw4MYQ7c4NztAZEzE#z6MkshbrFcsGztN9qUhYkbQGM3iZyX1Yw4MYQ7c4NztAZEzE"}`, claims)
	for _, c := range []struct {
		name   string
		prefix int
	}{{"early", earlyPrefix}, {"whole", len(tok)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !isDelegationJWTWithin(tok, c.prefix) {
					b.Fatal("not a delegation")
				}
			}
		})
	}
}
