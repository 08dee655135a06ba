package edge

import (
	"net/http"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
)

// Without Redis, two handlers (two routes or sites) with the same limit
// count the same agent together, in the process's memory: what the agent
// spent on one is spent on the other.
func TestRateLimitMemorySharedByHandlers(t *testing.T) {
	f := newFixture(t)
	limit := func(c *setup) { c.RateLimits = []ratelimit.Limit{perMinute(2, "agent")} }
	a, b := f.handler(t, limit), f.handler(t, limit)
	tok := f.jwt(t, nil)
	for i, h := range []*Handler{a, b} {
		if res := polServe(t, h, polPost(polCall(i, "echo"), tok), nil); !res.called {
			t.Fatalf("call %d: %d %s", i, res.rec.Code, res.rec.Body)
		}
	}
	for i, h := range []*Handler{a, b} {
		if res := polServe(t, h, polPost(polCall(i, "echo"), tok), nil); res.called || res.rec.Code != http.StatusTooManyRequests {
			t.Errorf("handler %d, third call: called %v, status %d; want 429", i, res.called, res.rec.Code)
		}
	}
}
