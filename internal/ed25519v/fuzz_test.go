package ed25519v

import (
	"crypto/ed25519"
	"testing"
)

// FuzzVerifyAgrees is the differential target: for a key derived from
// seed (or, by mode, a torsion encoding, the key's bytes mutated, or raw
// bytes), a signature of msg (mutated by mask, or replaced by it), this
// package's verifiers give crypto/ed25519's verdict.
func FuzzVerifyAgrees(f *testing.F) {
	tor := torsion(f)
	f.Add([]byte("seed"), []byte("msg"), byte(0), []byte{})
	f.Add([]byte("seed"), []byte("msg"), byte(1), []byte{0, 0, 0, 1})
	f.Add([]byte("seed"), []byte(""), byte(2), []byte{1})
	f.Add([]byte("k"), []byte("m"), byte(4), make([]byte, 96))
	f.Add([]byte("k"), []byte("m"), byte(8|4<<4), make([]byte, 64))
	f.Fuzz(func(t *testing.T, seed, msg []byte, mode byte, mask []byte) {
		var s [32]byte
		copy(s[:], seed)
		priv := ed25519.NewKeyFromSeed(s[:])
		pub := append([]byte(nil), priv.Public().(ed25519.PublicKey)...)
		sig := ed25519.Sign(priv, msg)
		switch mode & 3 {
		case 1: // mutate the signature
			for i := range min(len(mask), 64) {
				sig[i] ^= mask[i]
			}
		case 2: // mutate the key
			for i := range min(len(mask), 32) {
				pub[i] ^= mask[i]
			}
		case 3: // raw key and signature
			if len(mask) < 96 {
				return
			}
			pub, sig = mask[:32], mask[32:96]
		}
		if mode&4 != 0 { // a torsion key
			pub = tor[int(mode>>4)%len(tor)]
		}
		if mode&8 != 0 && len(mask) >= 64 { // raw signature
			sig = mask[:64]
		}
		same(t, pub, msg, sig)
	})
}
