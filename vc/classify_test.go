package vc

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
)

// credentialMarkers reports whether a JWS whose header typ is typ and whose
// payload (a JSON object) is payload carries one of the marks
// IsCredentialTyp and IsCredentialClaim look for.
func credentialMarkers(t *testing.T, typ string, payload []byte) bool {
	t.Helper()
	if IsCredentialTyp(typ) {
		return true
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatalf("test payload %q: %v", payload, err)
	}
	for k := range m {
		if IsCredentialClaim([]byte(k)) {
			return true
		}
	}
	return false
}

// parseWith builds an (unsigned) compact JWS with header typ and payload
// and parses it.
func parseWith(typ string, payload []byte) error {
	hdr := map[string]string{"alg": "EdDSA", "kid": "did:key:z6Mk#k"}
	if typ != "" {
		hdr["typ"] = typ
	}
	hb, _ := json.Marshal(hdr)
	e := base64.RawURLEncoding.EncodeToString
	_, _, err := parseJWS([]byte(e(hb) + "." + e(payload) + ".c2ln"))
	return err
}

var classifyTyps = []string{"", "JWT", "at+jwt", "vc+jwt", "VP+JWT", "vc+ld+jwt", "application/vp+ld+jwt", "Application/VC+LD+JWT", "applİcation/vc+jwt", "jose"}

var classifyPayloads = []string{
	`{}`, `{"sub":"alice","scope":"read"}`, `{"iss":"x","vc":{}}`, `{"VP":{}}`, `{"vc":null}`,
	`{"@context":["https://www.w3.org/ns/credentials/v2"],"type":["VerifiableCredential"]}`,
	`{"@CONTEXT":["https://www.w3.org/ns/credentials/v2"],"TYPE":"VerifiablePresentation"}`,
	`{"@context":1}`, `{"type":["VerifiableCredential"]}`, `{"credentialSubject":{"id":"x"}}`,
	`{"issuer":"did:key:z","credentialSubject":{}}`, `{"v\u0063":{}}`, `{"\u0040context":[],"type":[]}`,
	// Repeated names: without the marks still not a credential.
	`{"":[],"":[]}`, `{"sub":"a","SUB":{"x":1,"x":2}}`, `{"vc":{},"vc":null}`, `{"vp":1,"\u0076p":null}`,
}

// Whatever carries none of the marks, parseJWS refuses as not a credential
// (ErrUnsupportedFormat): a bearer without them is someone else's token.
func TestCredentialMarkersCoverParse(t *testing.T) {
	for _, typ := range classifyTyps {
		for _, p := range classifyPayloads {
			if credentialMarkers(t, typ, []byte(p)) {
				continue
			}
			if err := parseWith(typ, []byte(p)); !errors.Is(err, ErrUnsupportedFormat) {
				t.Errorf("typ %q payload %s: no credential marks, but parseJWS says %v", typ, p, err)
			}
		}
	}
	for typ, want := range map[string]bool{"vc+ld+jwt": true, "VP+LD+JWT": true, "application/vc+jwt": true, "JWT": false, "": false, "at+jwt": false} {
		if got := IsCredentialTyp(typ); got != want {
			t.Errorf("IsCredentialTyp(%q) = %v", typ, got)
		}
	}
}

func FuzzCredentialMarkersCoverParse(f *testing.F) {
	for _, typ := range classifyTyps {
		for _, p := range classifyPayloads {
			f.Add(typ, []byte(p))
		}
	}
	f.Fuzz(func(t *testing.T, typ string, payload []byte) {
		var m map[string]json.RawMessage
		if json.Unmarshal(payload, &m) != nil || m == nil || credentialMarkers(t, typ, payload) {
			return
		}
		if err := parseWith(typ, payload); !errors.Is(err, ErrUnsupportedFormat) {
			t.Errorf("typ %q payload %q: no credential marks, but parseJWS says %v", typ, payload, err)
		}
	})
}
