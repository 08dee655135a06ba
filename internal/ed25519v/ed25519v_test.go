package ed25519v

import (
	"crypto/ed25519"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"filippo.io/edwards25519"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RFC 8032 §7.1, tests 1 to 3: the key derives from the secret, the
// signature verifies, and any flipped bit of it does not.
func TestRFC8032Vectors(t *testing.T) {
	for _, v := range []struct{ secret, pub, msg, sig string }{
		{"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
			"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
			"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
		{"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
			"3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
			"92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
		{"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
			"fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
			"6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
	} {
		pub, msg, sig := unhex(t, v.pub), unhex(t, v.msg), unhex(t, v.sig)
		if got := ed25519.NewKeyFromSeed(unhex(t, v.secret)).Public().(ed25519.PublicKey); !got.Equal(ed25519.PublicKey(pub)) {
			t.Fatalf("vector key: %x", got)
		}
		if !same(t, pub, msg, sig) {
			t.Fatalf("vector %s refused", v.pub)
		}
		for bit := range 512 {
			bad := append([]byte(nil), sig...)
			bad[bit/8] ^= 1 << (bit % 8)
			if same(t, pub, msg, bad) {
				t.Fatalf("bit %d flipped accepted", bit)
			}
		}
	}
}

// The malleability rule: S + L (the same point equation) is refused, as are
// the high bits crypto/ed25519 checks first, wrong lengths, and a key that
// is not a point.
func TestRefusedEncodings(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	pub := priv.Public().(ed25519.PublicKey)
	msg := []byte("message")
	sig := ed25519.Sign(priv, msg)
	sPlusL := append(append([]byte(nil), sig[:32]...), addLE(sig[32:], lBytes(0))...)
	if sPlusL[63]&0xe0 != 0 {
		// The seed is fixed, so this never happens by chance: it would
		// mean the case below no longer tests S + L.
		t.Fatal("S + L overflows the top bits for this key: pick another seed")
	}
	notPoint := []byte{2, 31: 0} // y = 2 is not on the curve
	cases := map[string][3][]byte{
		"S + L":             {pub, msg, sPlusL},
		"top bits of S":     {pub, msg, append(append([]byte(nil), sig[:63]...), sig[63]|0x80)},
		"S = L":             {pub, msg, append(append([]byte(nil), sig[:32]...), lBytes(0)...)},
		"short signature":   {pub, msg, sig[:63]},
		"long signature":    {pub, msg, append(append([]byte(nil), sig...), 0)},
		"empty signature":   {pub, msg, nil},
		"short key":         {pub[:31], msg, sig},
		"long key":          {append(append([]byte(nil), pub...), 0), msg, sig},
		"key not on curve":  {notPoint, msg, sig},
		"other message":     {pub, []byte("messagf"), sig},
		"R of another sign": {pub, msg, append(flipSign(sig[:32]), sig[32:]...)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if same(t, c[0], c[1], c[2]) {
				t.Fatal("accepted")
			}
			if _, err := NewPublicKey(c[0]); len(c[0]) != 32 && err == nil {
				t.Fatal("NewPublicKey took a key of the wrong length")
			}
		})
	}
	if !same(t, pub, msg, sig) {
		t.Fatal("the unmutated signature is refused")
	}
}

// Small-order and mixed-order keys, canonical or not, with signatures made
// for them (including R with a torsion component): whatever the verdict,
// it is crypto/ed25519's, and both verdicts occur.
func TestTorsionKeysAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tor := torsion(t)
	scalar := func() *edwards25519.Scalar {
		var b [64]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		s, _ := new(edwards25519.Scalar).SetUniformBytes(b[:])
		return s
	}
	var accepted, refused int
	for i := range 240 {
		te := tor[i%len(tor)]
		T, err := new(edwards25519.Point).SetBytes(te)
		if err != nil {
			t.Fatalf("torsion encoding %x does not decode", te)
		}
		a := scalar()
		var pub []byte
		switch i % 3 {
		case 0: // a small-order key as encoded (a = 0)
			a = edwards25519.NewScalar()
			pub = te
		case 1: // mixed order: [a]B + T
			pub = new(edwards25519.Point).Add(new(edwards25519.Point).ScalarBaseMult(a), T).Bytes()
		default: // a clean key, R with a torsion component
			pub = new(edwards25519.Point).ScalarBaseMult(a).Bytes()
		}
		var rT *edwards25519.Point
		if i%2 == 1 {
			rT = T
		}
		msg := []byte{byte(i), byte(i >> 8)}
		if same(t, pub, msg, signFor(a, scalar(), rT, pub, msg)) {
			accepted++
		} else {
			refused++
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("accepted %d, refused %d: the cases do not reach both verdicts", accepted, refused)
	}
}

// Random keys, messages and signatures, valid and with random mutations of
// the signature or the key.
func TestRandomAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := 200
	if testing.Short() {
		n = 50
	}
	for i := range n {
		var seed [32]byte
		for j := range seed {
			seed[j] = byte(rng.Uint32())
		}
		priv := ed25519.NewKeyFromSeed(seed[:])
		pub := append([]byte(nil), priv.Public().(ed25519.PublicKey)...)
		msg := make([]byte, rng.IntN(300))
		for j := range msg {
			msg[j] = byte(rng.Uint32())
		}
		sig := ed25519.Sign(priv, msg)
		if !same(t, pub, msg, sig) {
			t.Fatal("a valid signature is refused")
		}
		switch i % 4 {
		case 0:
			sig[rng.IntN(64)] ^= byte(1 + rng.IntN(255))
		case 1:
			pub[rng.IntN(32)] ^= byte(1 + rng.IntN(255))
		case 2:
			msg = append(msg, 0)
		case 3:
			for j := range sig {
				sig[j] = byte(rng.Uint32())
			}
		}
		if same(t, pub, msg, sig) {
			t.Fatalf("case %d: a mutated signature is accepted", i)
		}
	}
}

// The generator's table against the library: [s]B for random s and for
// scalars whose digits sit on the edges (0, 1, L-1, 2^252, all-ones and
// every-digit-at-half patterns).
func TestBaseTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	zero := make([]byte, 32)
	var scalars [][]byte
	pattern := func(b byte) []byte {
		s := make([]byte, 32)
		for i := range s {
			s[i] = b
		}
		s[31] &= 0x0f // below 2^252 < L
		return s
	}
	scalars = append(scalars, zero, append([]byte{1}, zero[1:]...), lBytes(-1), lBytes(-2),
		append(append([]byte(nil), zero[:31]...), 0x10), pattern(0xff), pattern(0x20), pattern(0x82),
		pattern(0x08), pattern(0x10))
	for range 50 {
		var b [64]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		s, _ := new(edwards25519.Scalar).SetUniformBytes(b[:])
		scalars = append(scalars, s.Bytes())
	}
	for _, sb := range scalars {
		s, err := new(edwards25519.Scalar).SetCanonicalBytes(sb)
		if err != nil {
			t.Fatalf("%x: %v", sb, err)
		}
		var p point
		var got [32]byte
		p.doubleCombMult(zero, baseTable(), s.Bytes(), baseTable()).encode(&got)
		if want := new(edwards25519.Point).ScalarBaseMult(s).Bytes(); string(got[:]) != string(want) {
			t.Fatalf("[s]B = %x, want %x", got, want)
		}
	}
}
