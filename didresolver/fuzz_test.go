package didresolver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func FuzzParseDID(f *testing.F) {
	for _, s := range []string{
		"did:key:z6MkiupQ1QPitvNtmEwCb47mkfCtCoU9A6znu7ECSqyFbVXH",
		"did:web:example.com%3A8443:user:alice#key-1",
		"did:jwk:eyJrdHkiOiJPS1AifQ",
		"did:web:example.com#a:b@c/d?e%20",
		"did::x", "did:KEY:x", "did:web:a:", "did:web:a%2", "did:web:a/b", "did:web:a#", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDID(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidDID) || d != (DID{}) {
				t.Fatalf("error %v with %+v", err, d)
			}
			return
		}
		// Parsing is lossless: the parts give back the input.
		back := d.String()
		if d.Fragment != "" {
			back += "#" + d.Fragment
		}
		if back != s {
			t.Fatalf("round trip %q -> %q", s, back)
		}
		if again, err := ParseDID(back); err != nil || again != d {
			t.Fatalf("reparse: %+v %v", again, err)
		}
	})
}

func FuzzParseDocument(f *testing.F) {
	raw, _ := testDoc(f)
	f.Add([]byte(raw))
	f.Add([]byte(`{"id":"did:web:example.com"}`))
	f.Add([]byte(`{"id":"did:web:example.com","authentication":[{"id":"#k","type":"JsonWebKey2020","publicKeyJwk":{"kty":"EC","crv":"secp256k1","x":"AA","y":"AA"}}]}`))
	f.Add([]byte(`{"id":"did:web:example.com","service":[{"id":"#s","type":["a"],"serviceEndpoint":{"a":["b",{"c":"d"}]}}]}`))
	// The vectors are in the repository: a missing or broken file fails the
	// fuzz test rather than silently dropping these seeds.
	for _, vec := range loadVectors(f, "did-web-resolution.json").Vectors {
		if len(vec.Input.DIDDocument) > 0 {
			f.Add([]byte(vec.Input.DIDDocument))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := ParseDocument(data)
		if err != nil {
			if doc != nil || !errors.Is(err, ErrInvalidDocument) {
				t.Fatalf("%v with document %v", err, doc)
			}
			return
		}
		for _, rel := range []Relationship{Authentication, AssertionMethod} {
			for _, k := range doc.Keys(rel) {
				if k.Public == nil || !strings.HasPrefix(k.ID, doc.ID+"#") && !strings.HasPrefix(k.ID, "did:") {
					t.Fatalf("bad key %+v", k)
				}
			}
			for _, vm := range doc.VerificationMethod {
				_, err := doc.Key(vm.ID, rel)
				checkOneSentinel(t, err)
			}
		}
		for _, s := range doc.Service {
			s.Types()
			s.Endpoints()
		}
		// What parsed once must survive a marshal round trip.
		out, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if _, err := ParseDocument(out); err != nil {
			t.Fatalf("reparse: %v", err)
		}
	})
}

func FuzzResolveDIDKey(f *testing.F) {
	for _, s := range []string{
		"z6MkiupQ1QPitvNtmEwCb47mkfCtCoU9A6znu7ECSqyFbVXH",
		"zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme",
		"zDnaerDaTF5BXEavCrfRZEk316dpbLsfPDZ3WJ5hRTPFU2169",
		"z6MkNOTVALIDbase58!!!!", "z", "z1111", "6Mk",
	} {
		f.Add(s)
	}
	r := New()
	f.Fuzz(func(t *testing.T, id string) {
		did := "did:key:" + id
		doc, err := r.Resolve(context.Background(), did)
		checkOneSentinel(t, err)
		if err != nil {
			return
		}
		keys := doc.Keys(Authentication)
		if len(keys) != 1 {
			t.Fatalf("%d keys", len(keys))
		}
		// did:key encodings are canonical: the key gives back its DID.
		want, _, _ := strings.Cut(did, "#")
		got, kid, err := KeyDID(keys[0].Public)
		if err != nil || got != want || kid != keys[0].ID {
			t.Fatalf("KeyDID = %q %q %v, want %q", got, kid, err, want)
		}
	})
}
