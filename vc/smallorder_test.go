package vc

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"testing"
	"time"

	"filippo.io/edwards25519"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// smallOrderEncodings returns the encodings of the eight points of order
// dividing 8 (found as multiples of [L]P for a P outside the prime-order
// subgroup, so the list does not rest on memory), with the other sign bit
// and, where y < 19, y + p: every encoding crypto/ed25519 decodes to a
// torsion point. It also returns the eight points.
func smallOrderEncodings(t testing.TB) (encs [][]byte, points []*edwards25519.Point) {
	t.Helper()
	l := []byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}
	l[0]-- // L-1, a canonical scalar
	lMinus1, err := new(edwards25519.Scalar).SetCanonicalBytes(l)
	if err != nil {
		t.Fatal(err)
	}
	var gen *edwards25519.Point
	for y := byte(2); gen == nil; y++ {
		enc := make([]byte, 32)
		enc[0] = y
		p, err := new(edwards25519.Point).SetBytes(enc)
		if err != nil {
			continue
		}
		lp := new(edwards25519.Point).ScalarMult(lMinus1, p)
		lp.Add(lp, p) // [L]P: P's torsion component, times L
		four := new(edwards25519.Point).Add(lp, lp)
		four.Add(four, four)
		if four.Equal(edwards25519.NewIdentityPoint()) == 0 {
			gen = lp // of order 8
		}
	}
	seen := map[[32]byte]bool{}
	add := func(e []byte) {
		if _, err := new(edwards25519.Point).SetBytes(e); err == nil && !seen[[32]byte(e)] {
			seen[[32]byte(e)] = true
			encs = append(encs, e)
		}
	}
	p := edwards25519.NewIdentityPoint()
	for range 8 {
		points = append(points, new(edwards25519.Point).Set(p))
		e := p.Bytes()
		add(e)
		flipped := append([]byte(nil), e...)
		flipped[31] ^= 0x80
		add(flipped)
		if e[0] < 19 && allZero(e[1:31]) && e[31]&0x7f == 0 {
			n := append([]byte(nil), e...) // y + p = y - 19 + 2^255
			n[0] += 0xed
			for i := 1; i < 31; i++ {
				n[i] = 0xff
			}
			n[31] = 0x7f | e[31]&0x80
			add(n)
			n2 := append([]byte(nil), n...)
			n2[31] ^= 0x80
			add(n2)
		}
		p.Add(p, gen)
	}
	return encs, points
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// forgeSmallOrder makes, with no secret, a signature of msg that
// crypto/ed25519 accepts under the small-order key pub: R = [s]B + T, S = s
// holds whenever -[k]pub = T, which one of the eight T meets for a given s
// with probability at least 1/8.
func forgeSmallOrder(t testing.TB, pub []byte, torsion []*edwards25519.Point, msg []byte) []byte {
	t.Helper()
	for s := uint64(1); s < 1024; s++ {
		var sb [32]byte
		binary.LittleEndian.PutUint64(sb[:], s)
		sc, err := new(edwards25519.Scalar).SetCanonicalBytes(sb[:])
		if err != nil {
			t.Fatal(err)
		}
		sB := new(edwards25519.Point).ScalarBaseMult(sc)
		for _, tp := range torsion {
			sig := append(new(edwards25519.Point).Add(sB, tp).Bytes(), sb[:]...)
			if ed25519.Verify(pub, msg, sig) {
				return sig
			}
		}
	}
	t.Fatalf("no forgery under %x", pub)
	return nil
}

// forgedJWT is a compact JWS over hdr and claims with a forged signature
// under the small-order key pub.
func forgedJWT(t testing.TB, pub []byte, torsion []*edwards25519.Point, hdr, claims map[string]any) []byte {
	t.Helper()
	input := b64(mustJSON(t, hdr)) + "." + b64(mustJSON(t, claims))
	return []byte(input + "." + b64(forgeSmallOrder(t, pub, torsion, []byte(input))))
}

// TestSmallOrderKeysRefused: a credential, a presentation or a chain
// child "signed" by a did:key of a small-order Ed25519 point is forged by
// anyone (crypto/ed25519 accepts the forgeries), so each is refused as a
// bad signature, for every torsion point in every encoding, through the
// real did:key resolver.
func TestSmallOrderKeysRefused(t *testing.T) {
	f := newFixture(t)
	encs, torsion := smallOrderEncodings(t)
	if len(encs) < 12 {
		t.Fatalf("only %d encodings", len(encs))
	}
	aud := ForAudience(serverDID)
	kinds := []struct {
		name string
		make func(t *testing.T, small testKey, pub []byte) (raw []byte, opts []Option, checks []CheckOption)
	}{
		{"VC-JWT issued by it", func(t *testing.T, small testKey, pub []byte) ([]byte, []Option, []CheckOption) {
			raw := forgedJWT(t, pub, torsion, header("EdDSA", small.kid), f.vc11Claims(small))
			return raw, []Option{WithTrustedIssuers(small.did)}, []CheckOption{aud}
		}},
		{"JSON VC issued by it", func(t *testing.T, small testKey, pub []byte) ([]byte, []Option, []CheckOption) {
			c := f.jsonCredential(small)
			sig := forgeSmallOrder(t, pub, torsion, jcsOf(t, c)) // over the credential without proof
			c["proof"] = map[string]any{
				"type":               "Ed25519Signature2020",
				"created":            fixedNow.Format(time.RFC3339),
				"verificationMethod": small.kid,
				"proofPurpose":       "assertionMethod",
				"proofValue":         b64(sig),
			}
			return mustJSON(t, c), []Option{WithTrustedIssuers(small.did)}, []CheckOption{aud}
		}},
		{"VP-JWT held by it", func(t *testing.T, small testKey, pub []byte) ([]byte, []Option, []CheckOption) {
			leaf := signCred(t, f.ed, f.delegationVC(f.ed, small.did, "d-small", "", "a"), true)
			claims := map[string]any{
				"iss": small.did, "aud": serverDID, "nonce": "n-1", "jti": "urn:uuid:vp-1",
				"iat": fixedNow.Add(-time.Minute).Unix(), "exp": fixedNow.Add(2 * time.Minute).Unix(),
				"vp": map[string]any{
					"@context":             []any{"https://www.w3.org/2018/credentials/v1"},
					"type":                 []any{"VerifiablePresentation"},
					"verifiableCredential": credList(t, [][]byte{leaf}),
				},
			}
			raw := forgedJWT(t, pub, torsion, header("EdDSA", small.kid), claims)
			return raw, []Option{WithTrustedIssuers(f.ed.did)},
				[]CheckOption{aud, RequirePresentation(), WithPresentationNonce(nonceOnce())}
		}},
		{"chain child issued by it", func(t *testing.T, small testKey, pub []byte) ([]byte, []Option, []CheckOption) {
			root := signCred(t, f.ed, f.delegationVC(f.ed, small.did, "d-root", "", "a"), true)
			child := f.delegationVC(small, f.agent.did, "d-child", "d-root", "a")
			claims := map[string]any{"iss": small.did, "sub": f.agent.did, "jti": child["id"], "vc": child}
			raw := forgedJWT(t, pub, torsion, header("EdDSA", small.kid), claims)
			return raw, []Option{WithTrustedIssuers(f.ed.did)}, []CheckOption{aud, WithAncestors(root)}
		}},
	}
	v := func(opts []Option) *Verifier {
		return NewVerifier(didresolver.New(), append([]Option{WithClock(func() time.Time { return fixedNow })}, opts...)...)
	}
	ctx := context.Background()
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			for _, enc := range encs {
				did, kid, err := didresolver.KeyDID(ed25519.PublicKey(enc))
				if err != nil {
					t.Fatal(err)
				}
				small := testKey{did: did, kid: kid}
				raw, opts, checks := kind.make(t, small, enc)
				d, err := v(opts).Verify(ctx, raw, checks...)
				if d != nil || Reason(err) != "bad_signature" {
					t.Errorf("key %x: accepted %v, err %v; want bad_signature", enc, d != nil, err)
					continue
				}
				expectRefusal(t, d, err, ErrSignature, "bad_signature", "small-order Ed25519")
			}
		})
	}
}

// TestIssueRefusesSmallOrder: no credential is issued to a did:key of a
// small-order point (anyone could present it), in either form, and no
// hand-made Ed25519 private key whose public half is one signs.
func TestIssueRefusesSmallOrder(t *testing.T) {
	f := newFixture(t)
	encs, _ := smallOrderEncodings(t)
	tmpl := func(agent string) Template {
		return Template{AgentDID: agent, Audience: []string{serverDID}, ExpiresAt: time.Now().Add(time.Hour)}
	}
	edKey := f.ed.priv.(ed25519.PrivateKey)
	if _, err := IssueJWT(edKey, f.ed.kid, tmpl(f.agent.did)); err != nil {
		t.Fatalf("IssueJWT to a real agent: %v", err)
	}
	for _, enc := range encs {
		did, _, err := didresolver.KeyDID(ed25519.PublicKey(enc))
		if err != nil {
			t.Fatal(err)
		}
		if cred, err := IssueJWT(edKey, f.ed.kid, tmpl(did)); err != errSmallOrderAgent || cred != "" {
			t.Errorf("IssueJWT to %x = %q, %v", enc, cred, err)
		}
		if cred, err := IssueJSON(edKey, f.ed.kid, tmpl(did)); err != errSmallOrderAgent || cred != nil {
			t.Errorf("IssueJSON to %x = %q, %v", enc, cred, err)
		}
		forged := append(append(ed25519.PrivateKey{}, edKey.Seed()...), enc...)
		if cred, err := IssueJWT(forged, did+"#k", tmpl(f.agent.did)); err != errSmallOrderSigner || cred != "" {
			t.Errorf("IssueJWT signed by %x = %q, %v", enc, cred, err)
		}
		if cred, err := IssueJSON(forged, did+"#k", tmpl(f.agent.did)); err != errSmallOrderSigner || cred != nil {
			t.Errorf("IssueJSON signed by %x = %q, %v", enc, cred, err)
		}
	}
}
