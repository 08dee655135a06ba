package edge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// An agent that delegates onwards to DIDs it invents does not escape a
// limit keyed by agent: the limit counts the chain's first agent, whom the
// trusted user delegated to, and each invented DID's calls eat into that
// agent's allowance. Another agent the user delegated to
// directly keeps its own counter.
func TestRateLimitAgentCountsChainRoot(t *testing.T) {
	c := newChainFixture(t)
	h := c.handler(t, func(c *setup) { c.RateLimits = []ratelimit.Limit{perMinute(2, "agent")} })
	// mid, the user's agent, delegates to agent, which mints children.
	leafID := "urn:uuid:" + randomID(t)
	leaf := issueAs(t, c.mid, c.template(func(tm *vc.Template) {
		tm.ID = leafID
		tm.Scopes = []string{"tools:read"}
	}), func(_, cred map[string]any) { setDelegation(cred, "parentId", c.rootDlgt) })
	child := func() string {
		return issueAs(t, c.agent, c.template(func(tm *vc.Template) {
			tm.AgentDID = newParty(t).did
			tm.ID = "urn:uuid:" + randomID(t)
			tm.Scopes = []string{"tools:read"}
		}), func(_, cred map[string]any) { setDelegation(cred, "parentId", leafID) })
	}
	post := func(tok string, chain ...string) polResult {
		t.Helper()
		r := polPost(polCall(1, "echo"), tok)
		if len(chain) > 0 {
			r.Header.Set("KYA-OS-Delegation-Chain", strings.Join(chain, ", "))
		}
		return polServe(t, h, r, nil)
	}

	if res := post(leaf, c.root); !res.called {
		t.Fatalf("first call refused: %d %s", res.rec.Code, res.rec.Body)
	}
	if res := post(child(), c.root, leaf); !res.called {
		t.Fatalf("a sub-delegated agent's first call refused: %d %s", res.rec.Code, res.rec.Body)
	}
	for i := range 3 {
		res := post(child(), c.root, leaf)
		if res.called || res.rec.Code != http.StatusTooManyRequests {
			t.Fatalf("invented agent %d: called %v, status %d, want 429 (the root agent's limit is spent)", i, res.called, res.rec.Code)
		}
	}

	// A different agent the user delegated to is not held by mid's count.
	if res := post(c.jwt(t, nil)); !res.called {
		t.Fatalf("another of the user's agents refused: %d %s", res.rec.Code, res.rec.Body)
	}
}
