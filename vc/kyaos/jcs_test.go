package kyaos

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// TestAuditIntegrityJCS uses audit-integrity.json as a test of the JCS
// every proof hash depends on (docs/protocol/kyaos.md#canonical-json): keys sorted by UTF-16 code
// units, numbers in ECMAScript form, the event digest, and the RFC 9162
// root over the leaves. A vector expected to fail must differ somewhere.
func TestAuditIntegrityJCS(t *testing.T) {
	var file struct {
		Vectors []struct {
			ID       string
			Expected string
			Input    struct {
				Event            json.RawMessage
				EventCanonical   string
				EventDigest      string
				Canonicalization *struct {
					Value     json.RawMessage
					Canonical string
				}
				Leaves []string
				Root   string
			}
		}
	}
	loadVectors(t, "audit-integrity.json", &file)
	if len(file.Vectors) != 3 {
		t.Fatalf("%d vectors", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		t.Run(v.ID, func(t *testing.T) {
			in := v.Input
			canon, err := jcs.Transform(in.Event)
			if err != nil {
				t.Fatal(err)
			}
			ok := string(canon) == in.EventCanonical
			h := sha256.New()
			h.Write([]byte("org.kya-os.audit.event.v1\x00"))
			h.Write(canon)
			ok = ok && "sha256:"+hex.EncodeToString(h.Sum(nil)) == in.EventDigest
			if c := in.Canonicalization; c != nil {
				got, err := jcs.Transform(c.Value)
				if err != nil {
					t.Fatal(err)
				}
				ok = ok && string(got) == c.Canonical
			}
			ok = ok && merkleRoot(t, in.Leaves) == in.Root
			if ok != (v.Expected == "pass") {
				t.Fatalf("checks hold: %v, expected %s", ok, v.Expected)
			}
		})
	}
}

// merkleRoot is RFC 9162 §2.1.1 over entry digests ("sha256:<hex>").
func merkleRoot(t *testing.T, leaves []string) string {
	var hashes [][]byte
	for _, l := range leaves {
		d, err := hex.DecodeString(strings.TrimPrefix(l, "sha256:"))
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(append([]byte{0}, d...))
		hashes = append(hashes, s[:])
	}
	var mth func(h [][]byte) []byte
	mth = func(h [][]byte) []byte {
		if len(h) == 1 {
			return h[0]
		}
		k := 1
		for k*2 < len(h) {
			k *= 2
		}
		s := sha256.Sum256(append(append([]byte{1}, mth(h[:k])...), mth(h[k:])...))
		return s[:]
	}
	return "sha256:" + hex.EncodeToString(mth(hashes))
}
