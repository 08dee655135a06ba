package admit

import (
	"encoding/base64"
	"testing"
)

// jwtWith is an unsigned JWT whose payload is payload: the peek reads the
// payload only.
func jwtWith(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"EdDSA","typ":"JWT"}`)) + "." + enc([]byte(payload)) + ".c2ln"
}

func TestHasPresentationNonce(t *testing.T) {
	for name, tt := range map[string]struct {
		raw  string
		want bool
	}{
		"VP-JWT with nonce":       {jwtWith(`{"nonce":"n","vp":{}}`), true},
		"VP-JWT without nonce":    {jwtWith(`{"vp":{}}`), false},
		"VP-JWT empty nonce":      {jwtWith(`{"nonce":""}`), false},
		"VP-JWT nonce not string": {jwtWith(`{"nonce":7}`), false},
		"VP-JWT payload not JSON": {jwtWith(`nonce`), false},
		"VP-JWT payload not b64":  {"a.!!!.c", false},
		"JSON VP challenge":       {`{"type":"VerifiablePresentation","proof":{"challenge":"n"}}`, true},
		"JSON VP proof array":     {`{"proof":[{"challenge":"n"}]}`, true},
		"JSON VP two proofs":      {`{"proof":[{"challenge":"n"},{"challenge":"m"}]}`, false},
		"JSON VP no challenge":    {`{"proof":{"domain":"d"}}`, false},
		"JSON VP Proof folded":    {`{"Proof":{"challenge":"n"}}`, false},
		"JSON not an object":      {`{"proof":`, false},
		"garbage":                 {"a.b", false},
		"one segment":             {"abc", false},
		"empty":                   {"", false},
		"spaces":                  {"   ", false},
	} {
		if got := hasPresentationNonce([]byte(tt.raw)); got != tt.want {
			t.Errorf("%s: %v, want %v", name, got, tt.want)
		}
	}
}

// The peek reads untrusted credentials before any verification: it must
// not panic, whatever it is given.
func FuzzHasPresentationNonce(f *testing.F) {
	for _, s := range []string{jwtWith(`{"nonce":"n"}`), `{"proof":[{"challenge":"n"}]}`, "a.b.c", "", "{"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { hasPresentationNonce(raw) })
}
