package edge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
)

// A request proof's rate limits are taken after its signatures and before
// its nonce is written: proofs that do not verify spend none of the
// agent's budget, and an agent over its limit gets 429 without writing a
// marker, so its requests cannot fill the store other callers' proofs
// need.
func TestRateLimitBeforeProofNonce(t *testing.T) {
	f := newFixture(t)
	store := challenge.NewMemoryStore(bareContext(t))
	h := f.handler(t, func(s *setup) {
		s.RequestProof = "required"
		s.RateLimits = []ratelimit.Limit{perMinute(2, "agent")}
		useStore(store, "memory")(s)
	})
	for i := range 3 {
		bad := strings.Replace(signed(t, f.agent, testAudience, toolsCallBody), `"hi"`, `"ho"`, 1)
		if res := serve(t, h, proofCall(t, f, bad)); res.called || res.rec.Code != http.StatusUnauthorized {
			t.Fatalf("proof %d that does not verify: called %v, HTTP %d %s", i, res.called, res.rec.Code, res.rec.Body)
		}
	}
	var admitted string
	for i := range 2 {
		admitted = signed(t, f.agent, testAudience, toolsCallBody)
		if res := serve(t, h, proofCall(t, f, admitted)); !res.called || res.rec.Code != http.StatusOK {
			t.Fatalf("proof %d within the limit (after three that did not verify): called %v, HTTP %d %s", i, res.called, res.rec.Code, res.rec.Body)
		}
	}
	for i := range 5 {
		res := serve(t, h, proofCall(t, f, signed(t, f.agent, testAudience, toolsCallBody)))
		if res.called || res.rec.Code != http.StatusTooManyRequests || res.rec.Header().Get("Retry-After") == "" {
			t.Fatalf("proof %d over the limit: called %v, HTTP %d %s", i, res.called, res.rec.Code, res.rec.Body)
		}
		if e := decodeProofRPC(t, res.rec); e.Error.Code != codeRateLimited {
			t.Fatalf("proof %d over the limit: %s", i, res.rec.Body)
		}
	}
	if n := store.SingleUses(); n != 2 {
		t.Fatalf("the store holds %d proof markers, want the 2 admitted ones", n)
	}
	// A replay over the limit is refused by the limit first: it writes
	// nothing, and never reaches the upstream.
	if res := serve(t, h, proofCall(t, f, admitted)); res.called || res.rec.Code != http.StatusTooManyRequests {
		t.Fatalf("replay over the limit: called %v, HTTP %d %s", res.called, res.rec.Code, res.rec.Body)
	}
}

// Replaying a proof the agent already used costs the agent nothing: the
// upstream receives every signed body, and whoever holds one must not be
// able to spend the agent's budget (and lock it out) by sending it again.
// Each replay is refused 401 nonce replayed, and the agent's own fresh
// proofs are still admitted up to its limit.
func TestRateLimitProofReplaysSpendNothing(t *testing.T) {
	f := newFixture(t)
	store := challenge.NewMemoryStore(bareContext(t))
	h := f.handler(t, func(s *setup) {
		s.RequestProof = "required"
		s.RateLimits = []ratelimit.Limit{perMinute(3, "agent")}
		useStore(store, "memory")(s)
	})
	captured := signed(t, f.agent, testAudience, toolsCallBody)
	if res := serve(t, h, proofCall(t, f, captured)); !res.called || res.rec.Code != http.StatusOK {
		t.Fatalf("the agent's request: called %v, HTTP %d %s", res.called, res.rec.Code, res.rec.Body)
	}
	for i := range 6 {
		res := serve(t, h, proofCall(t, f, captured))
		if res.called || res.rec.Code != http.StatusUnauthorized || !strings.Contains(res.rec.Body.String(), "nonce_replayed") {
			t.Fatalf("replay %d: called %v, HTTP %d %s", i, res.called, res.rec.Code, res.rec.Body)
		}
	}
	for i := range 2 {
		if res := serve(t, h, proofCall(t, f, signed(t, f.agent, testAudience, toolsCallBody))); !res.called || res.rec.Code != http.StatusOK {
			t.Fatalf("the agent's fresh proof %d after six replays (limit 3): called %v, HTTP %d %s", i, res.called, res.rec.Code, res.rec.Body)
		}
	}
	if res := serve(t, h, proofCall(t, f, signed(t, f.agent, testAudience, toolsCallBody))); res.called || res.rec.Code != http.StatusTooManyRequests {
		t.Fatalf("the agent's fourth proof: called %v, HTTP %d, want 429: the limit still counts genuine requests", res.called, res.rec.Code)
	}
}
