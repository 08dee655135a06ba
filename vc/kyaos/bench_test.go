package kyaos

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// BenchmarkVerify: one fresh proof checked per iteration (did:key agent,
// memory nonces), against one bare Ed25519 verification.
func BenchmarkVerify(b *testing.B) {
	a := newAgent(b, didresolver.Ed25519)
	now := time.Unix(1_800_000_000, 0)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		body, _, err := SignRequest([]byte(call), a.priv, SignOptions{KID: a.kid, Audience: aud, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		bodies[i] = body
	}
	v := NewVerifier(didresolver.NewCache(didresolver.New()), &memNonces{}, WithClock(func() time.Time { return now }))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := v.Verify(context.Background(), Request{Body: bodies[i], Audience: aud}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBareEd25519(b *testing.B) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	msg := []byte(call)
	sig := ed25519.Sign(priv, msg)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("bad")
		}
	}
}

// BenchmarkVerifyReading is what Verify does around the signature and
// the nonce on the edge's proof-bearing tools/call (names checked by the
// caller, as mcp.ParseStrict does): read the body and the proof, check
// the numbers and the request hash, decode the header and build the
// signing input. It is BenchmarkVerify without the noise of the curve.
func BenchmarkVerifyReading(b *testing.B) {
	a := newAgent(b, didresolver.Ed25519)
	body, _, err := SignRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`),
		a.priv, SignOptions{KID: a.kid, Audience: aud})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var proofs [2]proofReader
		parsed, err := readRequest(body, true, &proofs)
		if err != nil {
			b.Fatal(err)
		}
		var p Proof
		if err := proofs[0].finish(parsed.canonical, &p); err != nil {
			b.Fatal(err)
		}
		sc := getScratch()
		if parsed.ambiguousNumber() || !parsed.hashMatches(p.RequestHash, sc) {
			b.Fatal("hash")
		}
		protected, _, _ := splitDetached(p.JWS)
		hdr, err := decodeB64URL(sc.hdr, protected)
		sc.hdr = hdr[:0]
		if err != nil || !headerNames(hdr, p.Alg, p.KID) {
			b.Fatal("header")
		}
		var inBuf [1024]byte
		if _, err := p.appendSigningInput(inBuf[:0], protected); err != nil {
			b.Fatal(err)
		}
		sc.release()
	}
}
