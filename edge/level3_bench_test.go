package edge

import (
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// BenchmarkHandshake measures complete handshakes (handshake: issue a
// challenge; verify: check the signed challenge, consume the nonce, verify
// the credential, issue a session) through the handler, terminate mode, one
// at a time. The agent's signature is included in each op (about 25µs of
// Ed25519); the agent's and issuer's did:key resolve from the cache.
//
//	go test -run '^$' -bench Handshake -benchtime 2s ./caddymodule/
func BenchmarkHandshake(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		f := newFixture(b)
		benchHandshake(b, f, f.l3Handler(b, nil))
	})
	b.Run("redis", func(b *testing.B) {
		redis := redistest.Start(b)
		f := newFixture(b)
		benchHandshake(b, f, f.l3Handler(b, useStore(redisStore(b, redis.Addr(), 0), "redis")))
	})
}

func benchHandshake(b *testing.B, f fixture, h *Handler) {
	cred := f.jwt(b, nil)
	b.ReportAllocs()
	for b.Loop() {
		hr := doHandshake(b, h, defaultHandshakePath, f.agent, nil)
		rep := rpcCall(b, h, defaultVerifyPath, verifyMsg(2, answer(b, f.agent, hr), cred), nil)
		if rep.Error != nil {
			b.Fatalf("verify: %s", rep.Raw)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "handshakes/s")
}
