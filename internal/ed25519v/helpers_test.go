package ed25519v

import (
	"crypto/ed25519"
	"crypto/sha512"
	"math/rand/v2"
	"sync"
	"testing"

	"filippo.io/edwards25519"
)

// torsion returns the encodings of the eight points of order dividing 8,
// found as [L]P for points P (so the list does not rest on memory), each
// also with the other sign bit (for x = 0 the "negative zero" encoding),
// and, where y < 19, y + p: the non-canonical encodings crypto/ed25519
// accepts.
func torsion(t testing.TB) [][]byte {
	t.Helper()
	lMinus1, err := new(edwards25519.Scalar).SetCanonicalBytes(lBytes(-1))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	found := map[[32]byte]bool{}
	for i := 0; len(found) < 8; i++ {
		if i > 10000 {
			t.Fatalf("found %d torsion points", len(found))
		}
		var seed [64]byte
		for j := range seed {
			seed[j] = byte(rng.Uint32())
		}
		s, _ := new(edwards25519.Scalar).SetUniformBytes(seed[:])
		p := new(edwards25519.Point).ScalarBaseMult(s)
		// Mix in a torsion component: a random y's point is in the full
		// group only if it decodes; try the hash of the seed.
		h := sha512.Sum512(seed[:])
		q, err := new(edwards25519.Point).SetBytes(h[:32])
		if err != nil {
			continue
		}
		p.Add(p, q)
		lp := new(edwards25519.Point).ScalarMult(lMinus1, p)
		lp.Add(lp, p)
		found[[32]byte(lp.Bytes())] = true
	}
	var out [][]byte
	for e := range found {
		out = append(out, append([]byte(nil), e[:]...), flipSign(e[:]))
		y := e
		y[31] &= 0x7f
		if smallY(y[:]) { // y + p, a second encoding, still fits in 255 bits
			n := addLE(y[:], fieldP())
			out = append(out, n, flipSign(n))
		}
	}
	return out
}

// smallY reports whether the little-endian y is below 19.
func smallY(y []byte) bool {
	for _, b := range y[1:] {
		if b != 0 {
			return false
		}
	}
	return y[0] < 19
}

func flipSign(e []byte) []byte {
	n := append([]byte(nil), e...)
	n[31] ^= 0x80
	return n
}

// addLE adds two 32-byte little-endian numbers (carry out dropped).
func addLE(a, b []byte) []byte {
	out := make([]byte, 32)
	c := 0
	for i := range 32 {
		s := int(a[i]) + int(b[i]) + c
		out[i], c = byte(s), s>>8
	}
	return out
}

// lBytes returns L + delta (little endian), L the group order.
func lBytes(delta int) []byte {
	l := []byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}
	l[0] = byte(int(l[0]) + delta) // deltas used here do not carry
	return l
}

// fieldP is p = 2^255 - 19, little endian.
func fieldP() []byte {
	p := make([]byte, 32)
	for i := range p {
		p[i] = 0xff
	}
	p[0], p[31] = 0xed, 0x7f
	return p
}

// same asserts that this package's verifiers and crypto/ed25519 agree on
// (pub, msg, sig), and returns the verdict: PublicKey.Verify (the table)
// and Cache.Verify (a key's first calls take crypto/ed25519's path; the
// cache's admission has tests of its own). Tables are kept per key across
// calls (a test flips many bits under one key), at most 32 at a time.
func same(t testing.TB, pub, msg, sig []byte) bool {
	t.Helper()
	want := len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, msg, sig)
	k, err := memoKey(pub)
	if err == nil {
		if got := k.Verify(msg, sig); got != want {
			t.Fatalf("PublicKey.Verify = %v, crypto/ed25519 %v\npub %x\nmsg %x\nsig %x", got, want, pub, msg, sig)
		}
	} else if want {
		t.Fatalf("NewPublicKey refused a key crypto/ed25519 accepts: %v\npub %x", err, pub)
	}
	if got := NewCache(1).Verify(pub, msg, sig); got != want {
		t.Fatalf("Cache.Verify = %v, crypto/ed25519 %v\npub %x\nmsg %x\nsig %x", got, want, pub, msg, sig)
	}
	return want
}

var memo struct {
	sync.Mutex
	keys map[string]*PublicKey
}

func memoKey(pub []byte) (*PublicKey, error) {
	memo.Lock()
	defer memo.Unlock()
	if k := memo.keys[string(pub)]; k != nil {
		return k, nil
	}
	k, err := NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	if memo.keys == nil || len(memo.keys) >= 32 {
		memo.keys = map[string]*PublicKey{}
	}
	memo.keys[string(pub)] = k
	return k, nil
}

// signFor signs msg as key a (secret scalar) would if its public key were
// pub, whatever pub is: R = [r]B + rTorsion, k = H(R || pub || msg),
// S = r + k·a. With pub = [a]B + T for a torsion point T, whether the
// cofactorless equation holds depends on k: the case crypto/ed25519 and
// this package must decide alike.
func signFor(a, r *edwards25519.Scalar, rTorsion *edwards25519.Point, pub, msg []byte) []byte {
	R := new(edwards25519.Point).ScalarBaseMult(r)
	if rTorsion != nil {
		R.Add(R, rTorsion)
	}
	rb := R.Bytes()
	h := sha512.New()
	h.Write(rb)
	h.Write(pub)
	h.Write(msg)
	k, _ := new(edwards25519.Scalar).SetUniformBytes(h.Sum(nil))
	s := new(edwards25519.Scalar).MultiplyAdd(k, a, r)
	return append(rb, s.Bytes()...)
}
