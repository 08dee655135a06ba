package ed25519v

import (
	"encoding/json"
	"os"
	"testing"
)

// TestWycheproof runs Project Wycheproof's EdDSA verification vectors
// (testvectors_v1/ed25519_test.json of github.com/C2SP/wycheproof) when
// MCPI_WYCHEPROOF_ED25519 names a copy of that file: every vector must get
// the verdict it expects, from this package and from crypto/ed25519 alike
// (same checks both). The file is not part of this repository; without the
// variable the test is skipped. RFC 8032's vectors (TestRFC8032Vectors)
// and the differential fuzz against crypto/ed25519 (FuzzVerifyAgrees) run
// always.
func TestWycheproof(t *testing.T) {
	path := os.Getenv("MCPI_WYCHEPROOF_ED25519")
	if path == "" {
		t.Skip("Wycheproof's vectors are not in this repository and CI cannot fetch them (RFC 8032's vectors and FuzzVerifyAgrees run instead): " +
			"set MCPI_WYCHEPROOF_ED25519 to a copy of testvectors_v1/ed25519_test.json to run them")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Algorithm  string `json:"algorithm"`
		TestGroups []struct {
			PublicKey struct {
				PK string `json:"pk"`
			} `json:"publicKey"`
			Tests []struct {
				TcID    int    `json:"tcId"`
				Comment string `json:"comment"`
				Msg     string `json:"msg"`
				Sig     string `json:"sig"`
				Result  string `json:"result"`
			} `json:"tests"`
		} `json:"testGroups"`
	}
	if err := json.Unmarshal(data, &file); err != nil || file.Algorithm != "EDDSA" {
		t.Fatalf("%s is not Wycheproof's EdDSA vectors (algorithm %q): %v", path, file.Algorithm, err)
	}
	n := 0
	for _, g := range file.TestGroups {
		pub := unhex(t, g.PublicKey.PK)
		for _, tc := range g.Tests {
			want := tc.Result == "valid"
			if tc.Result != "valid" && tc.Result != "invalid" {
				t.Fatalf("tcId %d: result %q (EdDSA has no acceptable vectors)", tc.TcID, tc.Result)
			}
			if got := same(t, pub, unhex(t, tc.Msg), unhex(t, tc.Sig)); got != want {
				t.Errorf("tcId %d (%s): verified %t, want %t", tc.TcID, tc.Comment, got, want)
			}
			n++
		}
	}
	t.Logf("%d vectors", n)
}
