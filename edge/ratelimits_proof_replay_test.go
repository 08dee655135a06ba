package edge

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
)

// slowReplayStore is a nonce store whose round trip for a marker already
// written hangs until released (a replay waiting on Redis), and which
// remembers locally the markers it confirmed, as the Redis store does.
type slowReplayStore struct {
	*challenge.MemoryStore
	mu        sync.Mutex
	confirmed map[[32]byte]bool
	entered   chan struct{} // a replay reached the store
	release   chan struct{}
}

func (s *slowReplayStore) UseOnce(ctx context.Context, digest [32]byte, ttl time.Duration) error {
	s.mu.Lock()
	replay := s.confirmed[digest]
	s.mu.Unlock()
	if replay {
		s.entered <- struct{}{}
		<-s.release
	}
	err := s.MemoryStore.UseOnce(ctx, digest, ttl)
	if err == nil {
		s.mu.Lock()
		s.confirmed[digest] = true
		s.mu.Unlock()
	}
	return err
}

func (s *slowReplayStore) Seen(digest [32]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed[digest]
}

// TestRateLimitConfirmedReplayHoldsNoCount: a replay of a proof whose
// marker this replica has confirmed is refused 401 before the rate limits
// are taken, so while it would wait on the store it holds none of the
// agent's budget, and the agent's own next request is admitted.
func TestRateLimitConfirmedReplayHoldsNoCount(t *testing.T) {
	f := newFixture(t)
	store := &slowReplayStore{MemoryStore: challenge.NewMemoryStore(bareContext(t)),
		confirmed: map[[32]byte]bool{}, entered: make(chan struct{}, 1), release: make(chan struct{})}
	h := f.handler(t, func(s *setup) {
		s.RequestProof = "required"
		s.RateLimits = []ratelimit.Limit{perMinute(2, "agent")}
		useStore(store, "memory")(s)
	})
	captured := signed(t, f.agent, testAudience, toolsCallBody)
	if res := serve(t, h, proofCall(t, f, captured)); !res.called || res.rec.Code != http.StatusOK {
		t.Fatalf("the agent's request: called %v, HTTP %d %s", res.called, res.rec.Code, res.rec.Body)
	}
	type outcome struct {
		called bool
		code   int
		body   string
	}
	done := make(chan outcome, 1)
	replay := proofCall(t, f, captured)
	go func() {
		res := serve(t, h, replay)
		done <- outcome{res.called, res.rec.Code, res.rec.Body.String()}
	}()
	var got outcome
	select {
	case got = <-done:
	case <-store.entered:
		// The replay waits on the store: the agent's own request now.
		res := serve(t, h, proofCall(t, f, signed(t, f.agent, testAudience, toolsCallBody)))
		close(store.release)
		<-done
		t.Fatalf("a replay reached the store with its count held: the agent's next request got HTTP %d (called %v), want it refused before counting", res.rec.Code, res.called)
	}
	if got.called || got.code != http.StatusUnauthorized || !strings.Contains(got.body, "nonce_replayed") {
		t.Fatalf("replay: called %v, HTTP %d %s", got.called, got.code, got.body)
	}
	if res := serve(t, h, proofCall(t, f, signed(t, f.agent, testAudience, toolsCallBody))); !res.called || res.rec.Code != http.StatusOK {
		t.Fatalf("the agent's second request (limit 2): called %v, HTTP %d %s", res.called, res.rec.Code, res.rec.Body)
	}
}
