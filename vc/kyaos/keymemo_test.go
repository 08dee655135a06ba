package kyaos

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"sync"
	"testing"
)

// TestKeyMemo: the memo answers as keyFits does, whatever it remembers: a
// key of small order is refused every time, even in the slot of a fit key
// it shares; a remembered key does not fit another algorithm.
func TestKeyMemo(t *testing.T) {
	small := make(ed25519.PublicKey, 32)
	small[0] = 1 // the identity point
	var smallKey [32]byte
	copy(smallKey[:], small)
	// A fit key in the same slot as the identity point.
	var good ed25519.PublicKey
	for good == nil {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		var k [32]byte
		copy(k[:], pub)
		if memoSlot(&k) == memoSlot(&smallKey) {
			good = pub
		}
	}
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	m := new(keyMemo)
	for range 2 {
		for _, c := range []struct {
			name string
			alg  string
			pub  any
			want bool
		}{
			{"fit", AlgEdDSA, good, true},
			{"small order, same slot", AlgEdDSA, small, false},
			{"fit, another algorithm", AlgES256, good, false},
			{"short", AlgEdDSA, good[:31], false},
			{"another fit key", AlgEdDSA, other, true},
			{"P-256", AlgES256, &ec.PublicKey, true},
			{"P-256 as EdDSA", AlgEdDSA, &ec.PublicKey, false},
		} {
			if got := m.fits(c.alg, c.pub); got != c.want || got != keyFits(c.alg, c.pub) {
				t.Errorf("%s: fits %v, want %v (keyFits %v)", c.name, got, c.want, keyFits(c.alg, c.pub))
			}
		}
	}
	slot := memoSlot(&smallKey)
	if !m.valid[slot] || string(m.keys[slot][:]) != string(good) {
		t.Error("the fit key is not remembered in its slot")
	}
}

func TestKeyMemoConcurrent(t *testing.T) {
	m := new(keyMemo)
	keys := make([]ed25519.PublicKey, 8)
	for i := range keys {
		keys[i], _, _ = ed25519.GenerateKey(rand.Reader)
	}
	small := make(ed25519.PublicKey, 32)
	small[0] = 1
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				for _, k := range keys {
					if !m.fits(AlgEdDSA, k) {
						t.Error("fit key refused")
					}
				}
				if m.fits(AlgEdDSA, small) {
					t.Error("identity point accepted")
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkKeyFits: the fitness check of an agent's key, done (keyFits)
// and remembered (keyMemo); compare with BenchmarkBareEd25519.
func BenchmarkKeyFits(b *testing.B) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	b.Run("checked", func(b *testing.B) {
		for b.Loop() {
			if !keyFits(AlgEdDSA, pub) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		m := new(keyMemo)
		for b.Loop() {
			if !m.fits(AlgEdDSA, pub) {
				b.Fatal("refused")
			}
		}
	})
}
