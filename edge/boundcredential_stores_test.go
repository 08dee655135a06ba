package edge

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestBoundCredentialNonceStores: a DPoP proof is taken once by every
// replica of a route, whatever store they share: the memory store, a store
// without single-use markers (records instead), and Redis, each replica
// with its own client.
func TestBoundCredentialNonceStores(t *testing.T) {
	f := newFixture(t)
	key := f.agent.priv.(ed25519.PrivateKey)
	jkt := keyThumbprint(t, key.Public())
	cred := f.jwt(t, func(tm *vc.Template) { tm.CnfJKT = jkt })
	redis := redistest.Start(t)
	memory := func() *challenge.MemoryStore {
		m := challenge.NewMemoryStore(context.Background())
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	for _, c := range []struct {
		name   string
		stores func() (challenge.NonceStore, challenge.NonceStore)
	}{
		{"memory", func() (challenge.NonceStore, challenge.NonceStore) { m := memory(); return m, m }},
		{"markerless", func() (challenge.NonceStore, challenge.NonceStore) { m := markerless{memory()}; return m, m }},
		{"redis", func() (challenge.NonceStore, challenge.NonceStore) {
			return redisStore(t, redis.Addr(), 0), redisStore(t, redis.Addr(), 0)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s1, s2 := c.stores()
			h1, h2 := f.handler(t, useStore(s1, c.name)), f.handler(t, useStore(s2, c.name))
			proof, err := dpop.NewProof(key, http.MethodPost, "http://"+testHost+"/mcp", cred, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			call := func(h *Handler) result {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set("Authorization", "DPoP "+cred)
				r.Header.Set("DPoP", proof)
				return serve(t, h, r)
			}
			if res := call(h1); !res.called {
				t.Fatalf("first use: %d %s", res.rec.Code, res.rec.Body)
			}
			for i, h := range []*Handler{h1, h2} {
				if res := call(h); res.called || !strings.Contains(res.rec.Body.String(), "dpop_replayed") {
					t.Fatalf("replay on replica %d: %d %s", i+1, res.rec.Code, res.rec.Body)
				}
			}
		})
	}
}
