package edge

import (
	"net/http"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe/observetest"
)

// A credential presented again is served from the verified-delegation cache:
// the second request is a hit, and both are admitted. With the cache off,
// nothing is looked up.
func TestVerificationCache(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	for _, tc := range []struct {
		name            string
		size            int
		wantHit, wanted float64
	}{
		{name: "default on", size: 0, wantHit: 1, wanted: 1},
		{name: "off", size: -1, wantHit: 0, wanted: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, reg := obsContext(t)
			h, _ := obsHandler(t, ctx, f, func(c *setup) {
				c.VerificationCacheSize = tc.size
			})
			for i := 0; i < 2; i++ {
				r := newRequest(http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
				r.Header.Set("Authorization", "Bearer "+tok)
				if res := serve(t, h, r); !res.called {
					t.Fatalf("request %d not admitted: %d %s", i, res.rec.Code, res.rec.Body)
				}
			}
			var hits, misses float64
			for _, s := range observetest.Gather(t, reg)["caddy_mcpi_cache_requests_total"] {
				if s.Labels["cache"] != "delegation" {
					continue
				}
				switch s.Labels["result"] {
				case "hit":
					hits += s.Value
				case "miss":
					misses += s.Value
				}
			}
			if hits != tc.wantHit || misses != tc.wanted {
				t.Errorf("cache hits %v misses %v, want %v and %v", hits, misses, tc.wantHit, tc.wanted)
			}
		})
	}
}
