package kyaos

import (
	"bytes"
	"strings"
	"testing"
)

// claimsProof is a proof whose free-form members are set from the
// arguments (the others are valid constants).
func claimsProof(aud, kid, nonce, jkt string, created, expires int64) *Proof {
	return &Proof{
		Prf: ProfileV1, Alg: AlgEdDSA, DID: "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
		KID: kid, Audience: aud, Nonce: nonce, Created: created, Expires: expires,
		RequestHash: "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:", CnfJKT: jkt,
	}
}

var claimsCases = []struct {
	aud, kid, nonce, jkt string
	plain                bool // written by the direct path
}{
	{"did:web:api.example.com", "did:key:z6Mk#z6Mk", "n1", "", true},
	{"did:web:api.example.com", "did:key:z6Mk#z6Mk", "n1", "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs", true},
	{"did:web:a<b>&c~", "did:web:x%3A1#k", "A-_z", "", true},
	{`did:web:a"b`, "did:key:z#z", "n", "", false},
	{`did:web:a\b`, "did:key:z#z", "n", "", false},
	{"did:web:é", "did:key:z#z", "n", "", false},
	{"did:web:a\x7fb", "did:key:z#z", "n", "", false},
	{"did:web:a\tb", "did:key:z#z", "n", "", false},
	{"did:web:a\u2028b", "did:key:z#\xff", "n", "", false},
	{"", "", "", "", true},
}

// TestCoveredClaimsDirectIsJCS: what the JWS signs is the same bytes
// whether written directly or encoded and canonicalised, and strings JCS
// would escape take the general path.
func TestCoveredClaimsDirectIsJCS(t *testing.T) {
	for _, c := range claimsCases {
		for _, times := range [][2]int64{{0, 0}, {1_800_000_000, 1_800_000_060}, {maxSafeInt, maxSafeInt}} {
			p := claimsProof(c.aud, c.kid, c.nonce, c.jkt, times[0], times[1])
			want, err := p.coveredClaimsJCS()
			if err != nil {
				t.Fatal(err)
			}
			direct, ok := p.appendPlainClaims(nil)
			if ok != c.plain || ok && !bytes.Equal(direct, want) {
				t.Fatalf("%q: direct %v %s, JCS %s", c.aud, ok, direct, want)
			}
			if got, err := p.coveredClaims(); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%q: coveredClaims %s, JCS %s (%v)", c.aud, got, want, err)
			}
		}
	}
}

// FuzzCoveredClaims: the direct path, when it applies, writes what JCS does.
func FuzzCoveredClaims(f *testing.F) {
	for _, c := range claimsCases {
		f.Add(c.aud, c.kid, c.nonce, c.jkt, int64(1_800_000_000))
	}
	f.Fuzz(func(t *testing.T, aud, kid, nonce, jkt string, created int64) {
		if created < 0 || created > maxSafeInt {
			return // ParseProof admits no other
		}
		p := claimsProof(aud, kid, nonce, jkt, created, created+60)
		want, err := p.coveredClaimsJCS()
		if err != nil {
			return
		}
		if direct, ok := p.appendPlainClaims(nil); ok && !bytes.Equal(direct, want) {
			t.Fatalf("direct %s, JCS %s", direct, want)
		}
	})
}

// plainJSONByteByByte is plainJSON as it was, one byte at a time: the
// reference the word-at-a-time test must agree with.
func plainJSONByteByByte(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// TestPlainJSONAgreesByteByByte: every byte value at every position of
// two words, among plain bytes and next to those whose borrow or carry
// could disturb the word test (0x00, 0x1f, 0x20, 0x21, '"' ± 1, '\\' ± 1,
// 0x7e, 0x7f, 0x80, 0xff).
func TestPlainJSONAgreesByteByByte(t *testing.T) {
	neighbours := []byte{0x00, 0x1f, 0x20, 0x21, '"' - 1, '"', '"' + 1, '\\' - 1, '\\', '\\' + 1, 0x7e, 0x7f, 0x80, 0xff, 'a'}
	for c := range 256 {
		for pos := range 17 {
			for _, n := range neighbours {
				for _, tail := range []int{0, 1, 7, 8, 9} {
					s := strings.Repeat("a", pos) + string([]byte{byte(c), n}) + strings.Repeat("z", tail)
					if got, want := plainJSON(s), plainJSONByteByByte(s); got != want {
						t.Fatalf("plainJSON(%q) = %v, byte by byte %v", s, got, want)
					}
				}
			}
		}
	}
}

func FuzzPlainJSON(f *testing.F) {
	for _, c := range claimsCases {
		f.Add(c.aud + c.kid)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := plainJSON(s), plainJSONByteByByte(s); got != want {
			t.Fatalf("plainJSON(%q) = %v, byte by byte %v", s, got, want)
		}
	})
}
