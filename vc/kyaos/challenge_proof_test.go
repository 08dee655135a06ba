package kyaos

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"
)

// TestChallengeProof: a challenge_proof verifies with the signer's key for
// exactly the challenge it was made for, within the skew.
func TestChallengeProof(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	did := "did:web:edge.example"
	s := ResponseSigner{Key: priv, DID: did, KID: did + "#k1"}
	now := time.Now()
	sid, uri, scopes := "kya-0123456789abcdef", "https://edge.example/oauth/authorize?x=1", []string{"a:read", "b:write"}
	jws, err := s.SignChallengeProof(sid, uri, scopes, now.Unix())
	if err != nil {
		t.Fatal(err)
	}
	kid := ChallengeProofKID(jws)
	if kid != did+"#k1" {
		t.Fatalf("kid %q", kid)
	}
	if err := VerifyChallengeProof(jws, pub, did, kid, sid, uri, scopes, now, 0); err != nil {
		t.Fatalf("own proof: %v", err)
	}
	for name, c := range map[string]struct {
		key                any
		did, kid, sid, uri string
		scopes             []string
		at                 time.Time
		jws                string
	}{
		"other key":      {other, did, kid, sid, uri, scopes, now, jws},
		"other signer":   {pub, "did:web:evil", kid, sid, uri, scopes, now, jws},
		"other kid":      {pub, did, did + "#k2", sid, uri, scopes, now, jws},
		"other sid":      {pub, did, kid, sid + "0", uri, scopes, now, jws},
		"other uri":      {pub, did, kid, sid, uri + "&y", scopes, now, jws},
		"fewer scopes":   {pub, did, kid, sid, uri, scopes[:1], now, jws},
		"scopes reorder": {pub, did, kid, sid, uri, []string{"b:write", "a:read"}, now, jws},
		"too late":       {pub, did, kid, sid, uri, scopes, now.Add(10 * time.Minute), jws},
		"truncated":      {pub, did, kid, sid, uri, scopes, now, jws[:len(jws)-4]},
		"two parts":      {pub, did, kid, sid, uri, scopes, now, jws[:strings.LastIndexByte(jws, '.')]},
		"garbage":        {pub, did, kid, sid, uri, scopes, now, "a.b.c"},
	} {
		if err := VerifyChallengeProof(c.jws, c.key, c.did, c.kid, c.sid, c.uri, c.scopes, c.at, 0); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func FuzzChallengeProof(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s := ResponseSigner{Key: priv, DID: "did:web:e", KID: "did:web:e#k"}
	now := time.Now()
	jws, _ := s.SignChallengeProof("kya-00", "https://e/c", []string{"a"}, now.Unix())
	f.Add(jws)
	f.Add("e30.e30.")
	f.Fuzz(func(t *testing.T, in string) {
		kid := ChallengeProofKID(in)
		// The signature's base64 may have other spellings; what it signs may not.
		signed := func(j string) string { return j[:strings.LastIndexByte(j, '.')+1] }
		if VerifyChallengeProof(in, pub, "did:web:e", kid, "kya-00", "https://e/c", []string{"a"}, now, 0) == nil && signed(in) != signed(jws) {
			t.Fatalf("another JWS verified: %q", in)
		}
	})
}
