package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
)

// An agent calling tool names it invents under a per-tool limit is
// refused, 429 with Retry-After and an error saying why, once it has
// started ratelimit.MaxToolsPerCaller counters; nothing more of it reaches
// the upstream, and another agent's calls still do.
func TestRateLimitToolCountersPerCaller(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) { c.RateLimits = []ratelimit.Limit{perMinute(10, "agent", "tool")} })
	tok := f.jwt(t, nil)
	for i := range ratelimit.MaxToolsPerCaller {
		if res := polServe(t, h, polPost(polCall(i, fmt.Sprint("made-up-", i)), tok), nil); !res.called {
			t.Fatalf("tool %d refused: %d %s", i, res.rec.Code, res.rec.Body)
		}
	}
	res := polServe(t, h, polPost(polCall(1, "one-more"), tok), nil)
	if res.called || res.rec.Code != http.StatusTooManyRequests || res.rec.Header().Get("Retry-After") == "" {
		t.Fatalf("tool %d: called %v, status %d, Retry-After %q; want 429 with Retry-After, not forwarded",
			ratelimit.MaxToolsPerCaller, res.called, res.rec.Code, res.rec.Header().Get("Retry-After"))
	}
	var e rlError
	if err := json.Unmarshal(res.rec.Body.Bytes(), &e); err != nil || e.Error.Code != codeRateLimited ||
		e.Error.Data.Reason != "rate_limited" || e.Error.Data.Limit != "agent+tool" ||
		!strings.Contains(e.Error.Message, "distinct tools") {
		t.Errorf("body %s", res.rec.Body)
	}
	other := fixture{user: f.user, agent: newParty(t)}
	if res := polServe(t, h, polPost(polCall(1, "one-more"), other.jwt(t, nil)), nil); !res.called {
		t.Fatalf("another agent refused: %d %s", res.rec.Code, res.rec.Body)
	}
}
