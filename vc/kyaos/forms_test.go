package kyaos

import (
	"regexp"
	"testing"
)

// The regular expressions of the proof fields (docs/protocol/kyaos.md#request-proofs) that forms.go implements by hand:
// the oracle the hand-written checks must agree with.
var formPatterns = []struct {
	name  string
	re    *regexp.Regexp
	check func(string) bool
}{
	{"kid", regexp.MustCompile(`^did:(key|web):.+#.+$`), isKID},
	{"did", regexp.MustCompile(`^did:(key|web):[^#?/\s]+$`), isAgentDID},
	{"b64url", regexp.MustCompile(`^[A-Za-z0-9_-]+$`), isB64URL[string]},
	{"b64url bytes", regexp.MustCompile(`^[A-Za-z0-9_-]+$`), func(s string) bool { return isB64URL([]byte(s)) }},
	{"requestHash", regexp.MustCompile(`^sha-256=:[A-Za-z0-9+/]{43}=:$`), isRequestHash},
}

var formInputs = []string{
	"", "a", "A-z_09", "a=", "a.b", "a b", "é", "\xff", "a\n",
	"did:key:z6Mk", "did:web:example.com", "did:key:", "did:web:", "did:foo:x", "DID:key:x",
	"did:key:z6Mk#z6Mk", "did:key:#x", "did:key:x#", "did:key:#", "did:key:##", "did:key:#a#", "did:key:a##",
	"did:key:a#b\n", "did:key:\na#b", "did:web:a#b", "did:web:a?b", "did:web:a/b", "did:web:a b",
	"did:web:a\tb", "did:web:a\fb", "did:web:a\rb", "did:web:a\vb", "did:web:ex%3A8443", "did:web:é",
	"did:web:\xff", "did:key:\xff#\xff", "did:key:é#é", "did:web:a\u00a0b", "did:web:a\u2028b",
	"sha-256=:" + "A" + "bcdefghijklmnopqrstuvwxyz0123456789+/ABCDE" + "=:",
	"sha-256=:" + "bcdefghijklmnopqrstuvwxyz0123456789+/ABCDE" + "=:",
	"sha-256=:" + "Abcdefghijklmnopqrstuvwxyz0123456789+/ABCDEF" + "=:",
	"sha-256=:" + "Abcdefghijklmnopqrstuvwxyz0123456789-_ABCDE" + "=:",
	"sha-256=:" + "Abcdefghijklmnopqrstuvwxyz0123456789+/ABCDE" + "==",
	"sha-256=:" + "Abcdefghijklmnopqrstuvwxyz0123456789+/ABCDE" + "=:\n",
	"sha-512=:" + "Abcdefghijklmnopqrstuvwxyz0123456789+/ABCDE" + "=:",
}

// TestFormsAgreeWithPatterns: each hand-written check accepts exactly what
// its regular expression matches, on edge cases of each form.
func TestFormsAgreeWithPatterns(t *testing.T) {
	for _, p := range formPatterns {
		for _, s := range formInputs {
			if got, want := p.check(s), p.re.MatchString(s); got != want {
				t.Errorf("%s(%q) = %v, the pattern says %v", p.name, s, got, want)
			}
		}
	}
}

// FuzzForms: the hand-written checks and their patterns agree on any input.
func FuzzForms(f *testing.F) {
	for _, s := range formInputs {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range formPatterns {
			if got, want := p.check(s), p.re.MatchString(s); got != want {
				t.Fatalf("%s(%q) = %v, the pattern says %v", p.name, s, got, want)
			}
		}
	})
}
