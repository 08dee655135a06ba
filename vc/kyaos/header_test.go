package kyaos

import (
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// headerNamesStrict is headerNames as it was, on the project's strict
// reader (jsonscan.CheckMembers, then the members): the oracle.
func headerNamesStrict(hdr []byte, alg, kid string) bool {
	if jsonscan.CheckMembers(hdr) != nil || firstByte(hdr) != '{' {
		return false
	}
	var a, k, t string
	ok := true
	jsonscan.Walk(hdr, func(key, val []byte) {
		switch string(jsonscan.Unquote(key)) {
		case "alg":
			ok = ok && readString(val, &a)
		case "kid":
			ok = ok && readString(val, &k)
		case "typ":
			ok = ok && readString(val, &t)
		default:
			ok = false
		}
	})
	return ok && a == alg && k == kid
}

const testKID = "did:key:z6Mk#z6Mk"

var headerInputs = []struct {
	hdr  string
	want bool
}{
	{`{"alg":"EdDSA","kid":"did:key:z6Mk#z6Mk"}`, true},
	{`{"kid":"did:key:z6Mk#z6Mk","alg":"EdDSA","typ":"JWT"}`, true},
	{` { "alg" : "EdDSA" , "kid" : "did:key:z6Mk#z6Mk" } `, true},
	{`{"alg":"EdDSA","kid":"did:key:z6Mk\u0023z6Mk"}`, true},
	{`{"\u0061lg":"EdDSA","kid":"did:key:z6Mk#z6Mk"}`, true},
	{`{"alg":"EdDSA","kid":"did:key:z6Mk#z6Mk","alg":"EdDSA"}`, false},
	{`{"alg":"EdDSA","kid":"did:key:z6Mk#z6Mk","\u0061lg":"EdDSA"}`, false},
	{`{"alg":"EdDSA","kid":"did:key:z6Mk#z6Mk","ALG":"EdDSA"}`, false},
	{`{"alg":"EdDSA","KID":"did:key:z6Mk#z6Mk"}`, false},
	{`{"alg":"EdDSA","\u212aid":"did:key:z6Mk#z6Mk"}`, false},
	{`{"alg":"EdDSA","kid":"did:key:z6Mk#z6Mk","typ":"JWT","typ":"JWT"}`, false},
	{`{"alg":"EdDSA","kid":"did:key:z6Mk#z6Mk","typ":null}`, false},
	{`{"alg":"EdDSA","kid":"did:key:z6Mk#z6Mk","typ":{"a":1,"a":2}}`, false},
	{`{"alg":"EdDSA","kid":"did:key:z6Mk#z6Mk","crit":["b64"]}`, false},
	{`{"alg":"ES256","kid":"did:key:z6Mk#z6Mk"}`, false},
	{`{"alg":"EdDSA"}`, false},
	{`{"kid":"did:key:z6Mk#z6Mk"}`, false},
	{`{"alg":"EdDSA","kid":"did:key:z6Mk#z6Mk"`, false},
	{`{"alg":"EdDSA","kid":"did:key:z6Mk#z6Mk"} x`, false},
	{`["alg","EdDSA"]`, false},
	{`{"alg":"EdDSA","kid":"did:key:z6Mk#z6Mk","typ":"\ud800"}`, true},
	{``, false},
}

// TestHeaderNames: the protected header check refuses what the strict
// reader refuses (repeated names, in any case or spelling), unknown
// members and values that are not strings, and agrees with the oracle.
func TestHeaderNames(t *testing.T) {
	for _, c := range headerInputs {
		got := headerNames([]byte(c.hdr), AlgEdDSA, testKID)
		if got != c.want || got != headerNamesStrict([]byte(c.hdr), AlgEdDSA, testKID) {
			t.Errorf("%s: %v, want %v (strict reading: %v)", c.hdr, got, c.want, headerNamesStrict([]byte(c.hdr), AlgEdDSA, testKID))
		}
	}
}

// FuzzHeaderNames: on any input, the check agrees with the strict reading.
func FuzzHeaderNames(f *testing.F) {
	for _, c := range headerInputs {
		f.Add([]byte(c.hdr), testKID)
	}
	f.Fuzz(func(t *testing.T, hdr []byte, kid string) {
		for _, alg := range []string{AlgEdDSA, AlgES256} {
			if got, want := headerNames(hdr, alg, kid), headerNamesStrict(hdr, alg, kid); got != want {
				t.Fatalf("%q (alg %s, kid %q): %v, strict reading %v", hdr, alg, kid, got, want)
			}
		}
	})
}
