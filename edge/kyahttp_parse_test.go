package edge

import (
	"context"
	"strings"
	"testing"
)

// TestKYASignatureLabel: only a Signature-Input member labelled kya asks
// for the 401 challenge; labels inside strings or inner lists, other
// labels, and oversized or odd values do not.
func TestKYASignatureLabel(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   bool
	}{
		{[]string{`kya=("@method" "@authority");created=1;keyid="did:key:z#z"`}, true},
		{[]string{`sig1=("@method");created=1, kya=("@target-uri");tag="kya-http/2"`}, true},
		{[]string{`sig1=("@method")`, `kya=("@method")`}, true},
		{[]string{`  kya=()`}, true},
		{[]string{`sig1=("@method");nonce="a, kya=(x)"`}, false},
		{[]string{`sig1=("a, kya=" "b")`}, false},
		{[]string{`kyax=("@method")`}, false},
		{[]string{`xkya=("@method")`}, false},
		{[]string{`KYA=("@method")`}, false},
		{[]string{`kya`}, false},
		{[]string{``}, false},
		{nil, false},
		{[]string{`sig1=("@method";nonce="\"", kya=()`}, false}, // an unclosed list swallows the rest
		{[]string{strings.Repeat("a", maxSignatureInput) + `, kya=()`}, false},
	} {
		if got := hasKYASignatureLabel(c.values); got != c.want {
			t.Errorf("%q: %t, want %t", c.values, got, c.want)
		}
	}
}

func FuzzKYASignatureLabel(f *testing.F) {
	f.Add(`sig1=("@method");created=1, kya=("@target-uri")`)
	f.Add(`sig1=("a, kya=" "b")`)
	f.Fuzz(func(t *testing.T, v string) {
		got := hasKYASignatureLabel([]string{v})
		if got && !strings.Contains(v, "kya=") {
			t.Fatalf("%q: a kya label without kya=", v)
		}
	})
}

// TestRequestStateResume: the resume token sealed in a requestState comes
// back for the agent and tool it was issued to; a truncated, altered or
// foreign state is refused.
func TestRequestStateResume(t *testing.T) {
	s, err := newStateSealer(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := s.sealResume("did:key:zA", "files", "resume-1")
	if got, err := s.openResume(st, "did:key:zA", "files"); err != nil || got != "resume-1" {
		t.Fatalf("openResume = %q, %v", got, err)
	}
	if got, err := s.openResume(s.seal("did:key:zA", "files"), "did:key:zA", "files"); err != nil || got != "" {
		t.Fatalf("a state without a resume token: %q, %v", got, err)
	}
	for _, c := range []struct{ state, agent, tool string }{
		{st, "did:key:zB", "files"},
		{st, "did:key:zA", "file"},
		{st, "did:key:zA", "filesresume-1"},
		{st[:len(st)-2], "did:key:zA", "files"},
		{st + "A", "did:key:zA", "files"},
		{requestStatePrefix, "did:key:zA", "files"},
		{"mcpi1.!!!", "did:key:zA", "files"},
	} {
		if _, err := s.openResume(c.state, c.agent, c.tool); err == nil {
			t.Errorf("state %q opened for %s/%s", c.state, c.agent, c.tool)
		}
	}
}

func FuzzRequestStateOpen(f *testing.F) {
	s, _ := newStateSealer(context.Background(), nil)
	f.Add(s.sealResume("did:key:zA", "files", "r"), "did:key:zA", "files")
	f.Add("mcpi1.AAAA", "", "")
	f.Fuzz(func(t *testing.T, state, agent, tool string) {
		_, _ = s.openResume(state, agent, tool) // must not panic
	})
}
