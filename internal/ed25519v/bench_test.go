package ed25519v

import (
	"crypto/ed25519"
	"testing"
)

// benchSigned returns a key and a signature over a message of the size of
// a KYA-OS VC-JWT's signing input.
func benchSigned(b *testing.B) (ed25519.PublicKey, []byte, []byte) {
	b.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 700)
	for i := range msg {
		msg[i] = 'a' + byte(i%26)
	}
	return pub, msg, ed25519.Sign(priv, msg)
}

// BenchmarkStdlibVerify is the floor this package lowers: crypto/ed25519.
func BenchmarkStdlibVerify(b *testing.B) {
	pub, msg, sig := benchSigned(b)
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkPublicKeyVerify: one key with its table.
func BenchmarkPublicKeyVerify(b *testing.B) {
	pub, msg, sig := benchSigned(b)
	k, err := NewPublicKey(pub)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !k.Verify(msg, sig) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkCacheVerify: through a Cache that holds the key's table, as the
// edge verifies a trusted issuer's credentials.
func BenchmarkCacheVerify(b *testing.B) {
	pub, msg, sig := benchSigned(b)
	c := NewCache(DefaultKeys)
	for range admitAfter {
		c.Verify(pub, msg, sig)
	}
	if n, _ := c.Stats(); n != 1 {
		b.Fatal("no table")
	}
	b.ReportAllocs()
	for b.Loop() {
		if !c.Verify(pub, msg, sig) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkNewPublicKey: building one table.
func BenchmarkNewPublicKey(b *testing.B) {
	pub, _, _ := benchSigned(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewPublicKey(pub); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheVerifyChurn: 1024 keys in turn through a Cache of 64, so
// keys keep earning tables and losing them: the case the build credits
// bound. Compare with BenchmarkStdlibVerify.
func BenchmarkCacheVerifyChurn(b *testing.B) {
	signers := make([]signer, 1024)
	for i := range signers {
		signers[i] = newSigner(i)
	}
	c := NewCache(DefaultKeys)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s := &signers[i%len(signers)]
		if !c.Verify(s.pub, s.msg, s.sig) {
			b.Fatal("refused")
		}
		i++
	}
	_, builds := c.Stats()
	b.ReportMetric(float64(builds)/float64(b.N), "builds/op")
}
