package toolpolicy

import (
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
