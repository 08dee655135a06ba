package vc

import (
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// sameAsJSON decodes b as JWT claims and as a JWS header with jsonScan and
// with encoding/json (unmarshalObject, the decoding jsonScan replaces) and
// fails unless jsonScan accepts exactly what encoding/json accepts without
// a repeated member name (jsonscan.CheckMembers), giving equal structs, and
// refuses as repeated only what CheckMembers finds repeated. It reports
// whether the claims and the header decoded.
func sameAsJSON(t *testing.T, b []byte) (claimsOK, headerOK bool) {
	t.Helper()
	repeated := errors.Is(jsonscan.CheckMembers(b), jsonkey.ErrRepeated)
	same := func(what string, errFast, errStd error, fast, std any) bool {
		t.Helper()
		if errors.Is(errFast, jsonkey.ErrRepeated) && !repeated {
			t.Fatalf("%s %q: jsonScan found a repeat CheckMembers does not", what, b)
		}
		if want := errStd == nil && !repeated; (errFast == nil) != want {
			t.Fatalf("%s %q: jsonScan error %v, encoding/json error %v, repeated %t", what, b, errFast, errStd, repeated)
		}
		if errFast == nil && !reflect.DeepEqual(fast, std) {
			t.Fatalf("%s %q:\njsonScan      %+v\nencoding/json %+v", what, b, fast, std)
		}
		return errFast == nil
	}
	var fast, std jwtPayload
	claimsOK = same("claims", decodeJWTPayload(b, &fast), unmarshalObject(b, &std), fast, std)
	var hFast, hStd jwsHeader
	headerOK = same("header", decodeJWSHeader(b, &hFast), unmarshalObject(b, &hStd), hFast, hStd)
	return claimsOK, headerOK
}

// jwtDecodeValid decode the same both ways, as claims and as a header,
// and succeed.
var jwtDecodeValid = map[string]string{
	"empty object":          `{}`,
	"whitespace":            " \t\r\n{ \"iss\" : \"a\" , \"aud\" :[ \"x\" , \"y\" ] } \n",
	"header":                `{"alg":"EdDSA","typ":"JWT","kid":"did:key:z6Mk#z6Mk","crit":["b64"],"b64":false,"jwk":{"kty":"OKP"}}`,
	"case-folded names":     `{"ISS":"a","Sub":"b","VC":{"TYPE":["VerifiableCredential"]},"ALG":"x"}`,
	"unicode folding":       `{"i\u017fs":"long s","\u212aid":"kelvin"}`,
	"null leaves strings":   `{"iss":null,"jti":null,"exp":null,"vc":{"issuanceDate":null}}`,
	"null lists":            `{"aud":null,"vc":{"type":null,"credentialSubject":null}}`,
	"null pointer":          `{"vc":null}`,
	"issuer object null id": `{"issuer":{"id":null}}`,
	"issuer null":           `{"issuer":null}`,
	"same names at levels":  `{"id":"a","vc":{"id":"b","credentialSubject":{"id":"c","delegation":{"id":"d"}}},"x":[{"id":1},{"id":2}]}`,
	"unicode folding raw":   "{\"i\xc5\xbfs\":\"long s\",\"\xe2\x84\xaaid\":\"kelvin\"}",
	"subject array":         `{"vc":{"credentialSubject":[{"id":"s","scope":["a"]}]}}`,
	"subject array of null": `{"vc":{"credentialSubject":[null]}}`,
	"issuer forms":          `{"issuer":"a","vc":{"issuer":{"id":"b","name":"n"}},"credentialSubject":{"id":"x"}}`,
	"scope string":          `{"scope":"  a  b\tc ","credentialSubject":{"scopes":""}}`,
	"scopes null elements":  `{"vc":{"credentialSubject":{"delegation":{"scopes":[null,"a"],"constraints":{"scopes":[]}}}}}`,
	"empty arrays":          `{"aud":[],"type":[],"scope":[]}`,
	"null elements":         `{"aud":[null,"a",null]}`,
	"dates":                 `{"exp":1e9,"nbf":-5,"iat":1.5e9,"vc":{"issuanceDate":"2026-03-01T12:00:00Z","validFrom":"2026-03-01T12:00:00.5+02:00","validUntil":"2026-03-01T12:00:00","expirationDate":null}}`,
	"date extremes":         `{"exp":1e300,"nbf":-1e300,"iat":0.0000001,"vc":{"credentialSubject":{"constraints":{"notBefore":12345678901234567890,"notAfter":-0}}}}`,
	"raw members":           `{"vp":null,"@context":["a",{"b":[1,2.5e-3,true,false,null]}],"credentialStatus":{"type":"x","n":[[]]},"vc":{"credentialStatus":[{},{}]}}`,
	"status list subject":   `{"credentialSubject":{"type":"StatusList2021","statusPurpose":"revocation","encodedList":"H4sI"}}`,
	"escapes":               `{"iss":"\u00e9\n\t\"\\\/\b\f\r","sub":"\ud83d\ude00","jti":"\ud800","kid":"\u0000"}`,
	"escaped names":         `{"\u0069ss":"a","v\u0063":{"\u0069d":"b"}}`,
	"invalid UTF-8":         "{\"iss\":\"a\xff\xfeb\",\"sub\":\"\xc3\",\"i\xffss\":\"c\"}",
	"unknown members":       `{"x":{"y":[{"z":"\u1234"},-0.5e+10,true,null,{}]},"iss":"a","createdAt":1700000000000,"status":"active"}`,
	"nesting 9999":          `{"x":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	"nesting objects":       `{"x":` + strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat("}", 5000) + `}`,
	"KYA-OS claims": `{"iss":"did:key:z6MkI","sub":"did:key:z6MkA","aud":"did:web:e","nbf":1772366340,"iat":1772366400,"exp":1772388000,` +
		`"jti":"urn:uuid:1","vc":{"@context":["https://www.w3.org/2018/credentials/v1"],"id":"urn:uuid:1",` +
		`"type":["VerifiableCredential","DelegationCredential"],"issuer":"did:key:z6MkI","issuanceDate":"2026-03-01T11:59:00.000Z",` +
		`"expirationDate":"2026-03-01T18:00:00.000Z","credentialSubject":{"id":"did:key:z6MkA","delegation":{"id":"1",` +
		`"issuerDid":"did:key:z6MkI","subjectDid":"did:key:z6MkA","userDid":"did:key:z6MkU","scopes":["greet:execute"],` +
		`"constraints":{"scopes":["greet:execute"],"notBefore":1772366340,"notAfter":1772388000,"audience":"did:web:e"},` +
		`"status":"active","createdAt":1772366400000}}}}`,

	// More than claimsRoom holds: two credentials (top level and vc), two
	// delegations, four constraints, string lists past its eight strings.
	"past the claims room": `{"@context":[],"type":["a","b","c"],"aud":["q","r","s"],` +
		`"credentialSubject":{"delegation":{"constraints":{"scopes":["x"],"audience":["y1","y2"]}},"constraints":{"audience":["y3"]}},` +
		`"vc":{"type":["d"],"credentialSubject":{"delegation":{"scopes":["s1"],"constraints":{"scopes":["s2"],"audience":["a1","a2","a3"]}},` +
		`"constraints":{"audience":["z"],"scopes":["t1","t2","t3","t4","t5","t6","t7","t8","t9"]}}}}`,
}

// jwtDecodeInvalid fail both ways: broken JSON, and values of the wrong
// type for their member.
var jwtDecodeInvalid = map[string]string{
	"empty":                  ``,
	"space":                  ` `,
	"array":                  `[]`,
	"null":                   `null`,
	"string":                 `"x"`,
	"number":                 `1`,
	"unclosed":               `{`,
	"close only":             `}`,
	"key without value":      `{"iss"}`,
	"colon without value":    `{"iss":}`,
	"trailing comma":         `{"iss":"a",}`,
	"lone comma":             `{,}`,
	"missing comma":          `{"iss":"a" "sub":"b"}`,
	"unquoted key":           `{iss:"a"}`,
	"single quotes":          `{'iss':'a'}`,
	"number key":             `{1:"a"}`,
	"text after":             `{"iss":"a"}x`,
	"second value":           `{"iss":"a"}{}`,
	"NUL after":              "{}\x00",
	"leading zero":           `{"x":01}`,
	"bare dot":               `{"x":1.}`,
	"bare minus":             `{"x":-}`,
	"leading dot":            `{"x":.5}`,
	"bare exponent":          `{"x":1e}`,
	"plus sign":              `{"x":+1}`,
	"hex":                    `{"x":0x10}`,
	"short literal":          `{"x":tru}`,
	"long literal":           `{"x":nulll}`,
	"capital literal":        `{"x":True}`,
	"bad escape":             `{"x":"\x"}`,
	"short unicode escape":   `{"x":"\u12"}`,
	"bad unicode escape":     `{"x":"\u12g4"}`,
	"escape at end":          `{"x":"\`,
	"control character":      "{\"x\":\"a\tb\"}",
	"control in name":        "{\"a\nb\":1}",
	"unterminated string":    `{"x":"abc}`,
	"array trailing comma":   `{"x":[1,]}`,
	"array missing comma":    `{"x":[1 2]}`,
	"array unclosed":         `{"x":[1}`,
	"object in array broken": `{"x":[{"a"}]}`,
	"nesting 10000":          `{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	"nesting in vc":          `{"vc":{"credentialSubject":{"x":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}}}`,
	"iss number":             `{"iss":1}`,
	"iss array":              `{"iss":["a"]}`,
	"iss true":               `{"iss":true}`,
	"vc string":              `{"vc":"x"}`,
	"vc array":               `{"vc":[]}`,
	"aud number":             `{"aud":1}`,
	"aud object":             `{"aud":{}}`,
	"aud element number":     `{"aud":["a",1]}`,
	"aud nested array":       `{"aud":[["a"]]}`,
	"exp string":             `{"exp":"1"}`,
	"exp out of range":       `{"exp":1e400}`,
	"exp array":              `{"exp":[1]}`,
	"scope number":           `{"scope":1}`,
	"scope object":           `{"scope":{}}`,
	"date not a date":        `{"vc":{"issuanceDate":"yesterday"}}`,
	"date number":            `{"validFrom":1772366400}`,
	"subject string":         `{"vc":{"credentialSubject":"x"}}`,
	"subject empty array":    `{"vc":{"credentialSubject":[]}}`,
	"two subjects":           `{"vc":{"credentialSubject":[{},{}]}}`,
	"subject array of lists": `{"credentialSubject":[[]]}`,
	"issuer number":          `{"vc":{"issuer":1}}`,
	"issuer id number":       `{"issuer":{"id":1}}`,
	"delegation array":       `{"vc":{"credentialSubject":{"delegation":[]}}}`,
	"constraints string":     `{"credentialSubject":{"constraints":"x"}}`,
	"notAfter string":        `{"credentialSubject":{"constraints":{"notAfter":"1"}}}`,
	"repeated scopes bad":    `{"scope":["a"],"scope":[1]}`,
	"header alg number":      `{"alg":1}`,
	"kid object":             `{"kid":{}}`,
}

// jwtDecodeRepeated repeat a member name, at some depth, in some case:
// encoding/json accepts them (decoding each repeat over the earlier
// value), jsonScan refuses them, as claims and as a header alike.
var jwtDecodeRepeated = map[string]string{
	"unicode folding repeat": `{"i\u017fs":"long s","\u212aid":"kelvin","\u212aID":"k2"}`,
	"folded and exact":       `{"Iss":"folded","iss":"exact"}`,
	"repeated members":       `{"iss":"a","iss":"b","aud":"x","aud":["y"],"exp":1,"exp":2}`,
	"null keeps strings":     `{"iss":"a","iss":null,"jti":null,"exp":5,"exp":null}`,
	"null clears lists":      `{"aud":"x","aud":null,"vc":{"type":"a","type":null}}`,
	"null clears pointers":   `{"vc":{"id":"a"},"vc":null}`,
	"pointers merge":         `{"vc":{"id":"a"},"vc":{"type":["t"]},"vc":{"credentialSubject":{"id":"s"}}}`,
	"subject merges":         `{"vc":{"credentialSubject":{"id":"s","delegation":{"id":"d"}},"credentialSubject":{"scope":"a b"}}}`,
	"subject null":           `{"vc":{"credentialSubject":{"id":"s"},"credentialSubject":null}}`,
	"issuer object null id":  `{"issuer":{"id":"a","id":null}}`,
	"issuer null":            `{"issuer":"a","issuer":null}`,
	"scopes repeated":        `{"vc":{"credentialSubject":{"delegation":{"scopes":["a","b"],"scopes":[null]},"scopes":"x y","scopes":["z",null,null]}}}`,
	"escaped repeat":         `{"iss":"a","\u0069ss":"b"}`,
	"Kelvin sign":            `{"vc":{"credentialSubject":{"delegation":{"k":1,"scopes":["a"],"\u212a":2}}}}`,
	"in a skipped member":    `{"x":{"y":[1,{"z":1,"Z":2}]}}`,
	"in @context":            `{"@context":["a",{"b":1,"b":2}]}`,
	"in credentialStatus":    `{"credentialStatus":{"type":"x","TYPE":"y"}}`,
	"in the header jwk":      `{"alg":"EdDSA","jwk":{"kty":"OKP","kty":"EC"}}`,
	"in an issuer object":    `{"issuer":{"id":"a","name":"n","Name":"m"}}`,
	"in a subject array":     `{"vc":{"credentialSubject":[{"id":"s","scope":["a"],"SCOPE":["b"]}]}}`,
	"credentialSubject case": `{"vc":{"credentialSubject":{"scopes":["admin"]},"credentialsubject":{"scopes":["read"]}}}`,
}

func TestJWTDecodeMatchesJSON(t *testing.T) {
	for name, in := range jwtDecodeValid {
		t.Run("valid/"+name, func(t *testing.T) {
			if claimsOK, headerOK := sameAsJSON(t, []byte(in)); !claimsOK || !headerOK {
				t.Fatal("refused")
			}
		})
	}
	for name, in := range jwtDecodeRepeated {
		t.Run("repeated/"+name, func(t *testing.T) {
			b := []byte(in)
			if unmarshalObject(b, new(jwtPayload)) != nil || unmarshalObject(b, new(jwsHeader)) != nil {
				t.Fatal("encoding/json refuses the input: not a repeat test")
			}
			var jp jwtPayload
			var h jwsHeader
			if err := decodeJWTPayload(b, &jp); !errors.Is(err, jsonkey.ErrRepeated) {
				t.Errorf("claims: %v, want ErrRepeated", err)
			}
			if err := decodeJWSHeader(b, &h); !errors.Is(err, jsonkey.ErrRepeated) {
				t.Errorf("header: %v, want ErrRepeated", err)
			}
			sameAsJSON(t, b)
		})
	}
	for name, in := range jwtDecodeInvalid {
		t.Run("invalid/"+name, func(t *testing.T) {
			// A type error in a claim leaves a valid header, and one in a
			// header member valid claims; one of the two must fail.
			if claimsOK, headerOK := sameAsJSON(t, []byte(in)); claimsOK && headerOK {
				t.Fatal("accepted")
			}
		})
	}
}

// TestJWTDecodeValues: what the claims decode to, by hand.
func TestJWTDecodeValues(t *testing.T) {
	var jp jwtPayload
	in := `{"iss":"did:key:z6MkI","sub":"caf\u00e9","exp":1772388000,"vc":{"type":"DelegationCredential","issuanceDate":"2026-03-01T11:59:00Z"}}`
	if err := decodeJWTPayload([]byte(in), &jp); err != nil {
		t.Fatal(err)
	}
	if jp.Iss != "did:key:z6MkI" || jp.Sub != "café" || !jp.Exp.set || jp.Exp.t.Unix() != 1772388000 {
		t.Fatalf("%+v", jp)
	}
	if jp.VC == nil || !reflect.DeepEqual(jp.VC.Type, stringList{"DelegationCredential"}) ||
		!jp.VC.IssuanceDate.t.Equal(time.Date(2026, 3, 1, 11, 59, 0, 0, time.UTC)) {
		t.Fatalf("%+v", jp.VC)
	}
}

// FuzzJWTDecodeMatchesJSON: on any input, jsonScan's decoding of JWT
// claims and JWS headers agrees with encoding/json's.
func FuzzJWTDecodeMatchesJSON(f *testing.F) {
	fx := newFixture(f)
	f.Add(mustJSON(f, fx.vc11Claims(fx.ed)))
	f.Add(mustJSON(f, fx.vc20Payload(fx.ed)))
	f.Add(mustJSON(f, header("EdDSA", fx.ed.kid)))
	for _, in := range jwtDecodeValid {
		if len(in) < 1000 {
			f.Add([]byte(in))
		}
	}
	for _, in := range jwtDecodeInvalid {
		if len(in) < 1000 {
			f.Add([]byte(in))
		}
	}
	for _, in := range jwtDecodeRepeated {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsJSON(t, b)
	})
}

func TestKindOfTyp(t *testing.T) {
	for typ, want := range map[string]typKind{
		"": typPlain, "JWT": typPlain, "jwt": typPlain, "application/JWT": typPlain,
		"vc+jwt": typVC, "Application/VC+JWT": typVC, "vc+ld+jwt": typVC,
		"vp+jwt": typVP, "VP+LD+JWT": typVP, "application/vp+jwt": typVP,
		"applİcation/jwt": typPlain, // Unicode lowers İ to i
		"application/":    typPlain,
		"at+jwt":          typOther, "jose": typOther, "application/application/jwt": typOther,
		"jwt ": typOther, "vc+jwt/": typOther,
	} {
		if got := kindOfTyp(typ); got != want {
			t.Errorf("kindOfTyp(%q) = %v, want %v", typ, got, want)
		}
	}
}

// parseJWS decodes header and payload into one buffer; what it reports
// for a broken part is still the first broken part, the header before the
// payload, whichever of base64 and JSON is broken.
func TestParseJWSReportsTheFirstBrokenPart(t *testing.T) {
	b64 := base64.RawURLEncoding.EncodeToString
	goodHeader := b64([]byte(`{"alg":"EdDSA","typ":"JWT"}`))
	goodPayload := b64([]byte(`{"vc":{"@context":["https://www.w3.org/2018/credentials/v1"],"type":["VerifiableCredential"]}}`))
	for _, c := range []struct{ name, token, want string }{
		{"header base64 and payload base64", "a.a.sig", "JWS header"},
		{"header JSON and payload base64", b64([]byte("{")) + ".a.sig", "JWS header"},
		{"header base64, payload fine", "a." + goodPayload + ".sig", "JWS header"},
		{"payload base64", goodHeader + ".a.sig", "JWS payload"},
		{"payload JSON", goodHeader + "." + b64([]byte(`{"vc":`)) + ".sig", "JWT claims"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := parseJWS([]byte(c.token))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrMalformed about %q", err, c.want)
			}
		})
	}
}

// fieldName compares an ASCII key only with names of its length; it must
// select what comparing with every name selects, for ASCII keys and for
// keys that fold to ASCII from other letters (ſ, K, İ).
func TestFieldNameAgreesWithFolding(t *testing.T) {
	ref := func(key string, names []string) string {
		for _, n := range names {
			if key == n {
				return n
			}
		}
		for _, n := range names {
			if strings.EqualFold(key, n) {
				return n
			}
		}
		return ""
	}
	lists := [][]string{headerNames, payloadNames, credentialNames, subjectNames, delegationNames, constraintNames}
	keys := []string{"", "i", "id", "ID", "Id", "iD", "iss", "ISS", "iſs", "ſub", "\u212aid", "kid", "KID",
		"issuer", "Issuer", "issuerDid", "createdAt", "status", "vc", "VC", "vp", "@context", "@CONTEXT",
		"credentialsubject", "CREDENTIALSUBJECT", "credentialſubject", "scope", "scopes", "SCOPEſ",
		"notbefore", "NOTAFTER", "audience", "audiencé", "typ", "type", "TYPE", "x5c", "X5C", "b64", "B64",
		"\xff", "i\xffs", "alg\x00", "constraints", "delegation", "encodedlist", "statuspurpose"}
	for _, names := range lists {
		for _, k := range keys {
			if got, want := fieldName(k, names), ref(k, names); got != want {
				t.Errorf("fieldName(%q) = %q, comparing with every name gives %q", k, got, want)
			}
		}
	}
}
