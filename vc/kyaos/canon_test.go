package kyaos

import (
	"bytes"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

var canonInputs = []struct {
	in    string
	ok    bool // appendCanonical writes it (else the caller falls back)
	canon string
}{
	{`{"name":"pay","arguments":{"amount":42.10,"n":1e2}}`, true, `{"arguments":{"amount":42.1,"n":100},"name":"pay"}`},
	{` { "b" : [ 1 , -0 , 0 , -1 , 1.0 , 1e21 , 1E-7 , 123456789012345 , 1234567890123456789 ] , "a" : null } `, true,
		`{"a":null,"b":[1,0,0,-1,1,1e+21,1e-7,123456789012345,1234567890123456800]}`},
	{`{"a b":1,"a":2,"":3,"A":4,"a!":5}`, true, `{"":3,"A":4,"a":2,"a b":1,"a!":5}`},
	{`{"t":true,"f":false,"e":{},"l":[],"s":"héllo ☃ 𝄞 <&>","n":[[{"z":1,"y":2}]]}`, true,
		`{"e":{},"f":false,"l":[],"n":[[{"y":2,"z":1}]],"s":"héllo ☃ 𝄞 <&>","t":true}`},
	{`"x"`, true, `"x"`},
	{`{"a":"\n"}`, false, ""},
	{`{"\u0061":1}`, false, ""},
	{`{"é":1,"e":2}`, false, ""},
	{`{"a":"\/"}`, false, ""},
}

// TestAppendCanonical: the direct canonicaliser writes what jcs.Transform
// does, and declines escapes and non-ASCII names.
func TestAppendCanonical(t *testing.T) {
	for _, c := range canonInputs {
		got, rest, ok := appendCanonical(nil, []byte(c.in))
		if ok != c.ok {
			t.Fatalf("%s: ok %v", c.in, ok)
		}
		if !ok {
			continue
		}
		want, err := jcs.Transform([]byte(c.in))
		if err != nil || string(got) != c.canon || !bytes.Equal(got, want) || len(trimWS(rest)) != 0 {
			t.Fatalf("%s: got %s, want %s, jcs %s (%v), rest %q", c.in, got, c.canon, want, err, rest)
		}
	}
}

// FuzzCanonical: on any strict JSON it accepts, appendCanonical writes
// exactly what jcs.Transform writes (the requestHash depends on it).
func FuzzCanonical(f *testing.F) {
	for _, c := range canonInputs {
		f.Add([]byte(c.in))
	}
	f.Add([]byte(call))
	f.Fuzz(func(t *testing.T, in []byte) {
		if jsonscan.CheckMembers(in) != nil {
			return // requestHash reads only strict JSON
		}
		got, rest, ok := appendCanonical(nil, in)
		if !ok || len(trimWS(rest)) != 0 {
			return
		}
		want, err := jcs.Transform(in)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q: direct %s, jcs %s (%v)", in, got, want, err)
		}
	})
}

var skipInputs = []string{
	`{"name":"pay","_meta":{"x":[1,{"b":2,"a":1}]},"arguments":{"amount":42.10}}`,
	`{"_meta":{},"b":1,"a":2}`,
	`{"b":1,"a":2,"_meta":null}`,
	`{"a":1,"_meta":"m"}`,
	`{"_meta":1}`,
	`{"a":{"_meta":1},"z":[{"_meta":2}]}`, // nested ones stay
	`{"_metax":1,"_meta":2,"_met":3}`,
	`{ "z" : 1 , "_meta" : { "k" : "v" } , "y" : 2 }`,
	`[{"_meta":1}]`, // not an object: nothing skipped
	`{"name":"pay","arguments":{"amount":1}}`,
}

// TestAppendCanonicalSkipping: skipping _meta as it canonicalises gives
// the canonical form of the object rebuilt without it (withoutMember), the
// requestHash's covered part.
func TestAppendCanonicalSkipping(t *testing.T) {
	for _, in := range skipInputs {
		checkSkipping(t, []byte(in), true)
	}
}

// FuzzCanonicalSkipping: the same on any strict JSON the fast path takes.
func FuzzCanonicalSkipping(f *testing.F) {
	for _, in := range skipInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if jsonscan.CheckMembers(in) != nil {
			return
		}
		checkSkipping(t, in, false)
	})
}

func checkSkipping(t *testing.T, in []byte, mustTake bool) {
	t.Helper()
	got, rest, ok := appendCanonicalSkipping(nil, in, metaKey)
	if !ok || len(trimWS(rest)) != 0 {
		if mustTake {
			t.Fatalf("%s: not taken", in)
		}
		return
	}
	without := in
	if firstByte(in) == '{' {
		without, _ = withoutMember(in, metaKey)
	}
	want, err := jcs.Transform(without)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s: skipping %s, jcs of %s: %s (%v)", in, got, without, want, err)
	}
}
