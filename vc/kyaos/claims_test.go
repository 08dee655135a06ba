package kyaos

import (
	"bytes"
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
