package authserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// countingStore counts the owned bindings written through it.
type countingStore struct {
	Store
	writes atomic.Int64
}

func (c *countingStore) BindOwned(ctx context.Context, kind, owner, key string, value []byte, ttl time.Duration, max int) error {
	c.writes.Add(1)
	return c.Store.(challenge.OwnedBinder).BindOwned(ctx, kind, owner, key, value, ttl, max)
}

func (c *countingStore) Take(ctx context.Context, key string) ([]byte, error) {
	return c.Store.(challenge.OwnedBinder).Take(ctx, key)
}

func kyaServer(t *testing.T, st Store, keys KeyStorage) *Server {
	t.Helper()
	s, err := New(context.Background(), Config{KYAHTTP: &KYAHTTPConfig{TTL: time.Minute, Interval: time.Second}}, Deps{
		Store:  st,
		Keys:   keys,
		Origin: func(*http.Request) string { return "https://edge.example" },
		User:   func(*http.Request) string { return "alice" },
		Scopes: []Scope{{Name: "a"}, {Name: "b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pollAt(s *Server, sid, token string) (int, map[string]any) {
	req := httptest.NewRequest(http.MethodGet, "https://edge.example"+pathPickup+sid, nil)
	if token != "" {
		req.Header.Set(pickupTokenHeader, token)
	}
	rec := httptest.NewRecorder()
	s.Serve(rec, req)
	var m map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	return rec.Code, m
}

// approveLink approves the consent link as the signed-in user of s.
func approveLink(t *testing.T, s *Server, link string) {
	t.Helper()
	u, _ := url.Parse(link)
	tk, err := s.readTicket(u.Query(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "https://edge.example/oauth/authorize", nil)
	if err := s.approve(req, tk, s.users.opaqueID("alice"), time.Now()); err != nil {
		t.Fatal(err)
	}
}

// redisReplicas are two servers made by mk sharing a Redis store and key
// storage, as two replicas of the edge.
func redisReplicas(t *testing.T, mk func(*testing.T, Store, KeyStorage) *Server) (*Server, *Server) {
	t.Helper()
	redis := redistest.Start(t)
	keys := newMemKeys()
	replica := func() *Server {
		st, err := challenge.NewRedisStore(challenge.RedisOptions{URL: redis.URL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return mk(t, st, keys)
	}
	return replica(), replica()
}

// race runs n calls of f at once, alternating between replicas a and b,
// and counts those that report success.
func race(n int, a, b *Server, f func(i int, s *Server) bool) int {
	var won atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			if f(i, s) {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(won.Load())
}

var (
	tokA = strings.Repeat("A", 43)
	tokB = strings.Repeat("B", 43)
)

// TestPickupAcrossReplicas: two replicas sharing Redis and key storage:
// the session one issued is pinned on the other, approved on the first and
// picked up on the second, and another holder is refused on both.
func TestPickupAcrossReplicas(t *testing.T) {
	a, b := redisReplicas(t, kyaServer)
	c, ok := a.NewKYAChallenge("https://edge.example", AgentPrompt{AgentDID: "did:key:zAgent", Tool: "t", Missing: []string{"b"}, Held: []string{"a"}}, time.Now())
	if !ok {
		t.Fatal("no challenge")
	}
	if code, m := pollAt(b, c.SID, tokA); code != http.StatusAccepted || m["status"] != "pending" {
		t.Fatalf("first poll on b: %d %v", code, m)
	}
	if code, m := pollAt(a, c.SID, tokB); code != http.StatusForbidden || m["error"] != "kyaos/pickup-pinned" {
		t.Fatalf("another holder on a: %d %v", code, m)
	}
	approveLink(t, a, c.ConsentURI)
	time.Sleep(600 * time.Millisecond)
	code, m := pollAt(b, c.SID, tokA)
	if code != http.StatusOK || m["status"] != "ready" || m["delegation"] == "" {
		t.Fatalf("pickup on b after approval on a: %d %v", code, m)
	}
	if code, _ := pollAt(a, c.SID, tokB); code != http.StatusForbidden {
		t.Fatalf("another holder after approval: %d", code)
	}
	// Handed out once: the holder's next poll, on either replica, is told
	// it was.
	time.Sleep(600 * time.Millisecond)
	code, m = pollAt(a, c.SID, tokA)
	if desc, _ := m["error_description"].(string); code != http.StatusGone || m["error"] != "kyaos/pickup-expired" || m["delegation"] != nil || !strings.Contains(desc, "already handed out") {
		t.Fatalf("the holder's poll after the pickup: %d %v, want 410 kyaos/pickup-expired saying it was handed out", code, m)
	}
}

// TestPickupRacingFirstPolls: polls racing for a session already
// approved, with different tokens, on two replicas sharing Redis: exactly
// one gets the delegation, whatever the pins say.
func TestPickupRacingFirstPolls(t *testing.T) {
	a, b := redisReplicas(t, kyaServer)
	for round := range 5 {
		c, ok := a.NewKYAChallenge("https://edge.example", AgentPrompt{AgentDID: "did:key:zAgent", Missing: []string{"b"}}, time.Now())
		if !ok {
			t.Fatal("no challenge")
		}
		approveLink(t, a, c.ConsentURI)
		n := race(6, a, b, func(i int, s *Server) bool {
			code, _ := pollAt(s, c.SID, strings.Repeat(string(rune('A'+i)), 43))
			return code == http.StatusOK
		})
		if n != 1 {
			t.Fatalf("round %d: %d racing polls got the delegation, want exactly 1", round, n)
		}
	}
}

// TestPinsBoundedPerAgent: an agent holds at most maxPinsPerAgent live
// pins; one more drops its oldest, never another agent's. Polls that are
// refused (no token, unknown or expired session, another holder) write
// nothing.
func TestPinsBoundedPerAgent(t *testing.T) {
	mem := challenge.NewMemoryStore(context.Background())
	t.Cleanup(func() { _ = mem.Close() })
	st := &countingStore{Store: mem}
	s := kyaServer(t, st, nil)
	now := time.Now()
	session := func(agent string) string {
		c, ok := s.NewKYAChallenge("https://edge.example", AgentPrompt{AgentDID: agent, Missing: []string{"a"}}, now)
		if !ok {
			t.Fatal("no challenge")
		}
		return c.SID
	}
	other := session("did:key:zOther")
	if code, _ := pollAt(s, other, tokA); code != http.StatusAccepted {
		t.Fatalf("other agent's first poll: %d", code)
	}
	first := session("did:key:zFlood")
	pollAt(s, first, tokA)
	for range maxPinsPerAgent {
		pollAt(s, session("did:key:zFlood"), tokA)
	}
	if code, _ := pollAt(s, first, tokB); code != http.StatusAccepted {
		t.Errorf("the flooding agent's oldest pin should be gone (a new holder pins it), got %d", code)
	}
	if code, _ := pollAt(s, other, tokB); code != http.StatusForbidden {
		t.Errorf("another agent's pin was dropped by the flood: %d", code)
	}

	before := st.writes.Load()
	expired, _ := s.NewKYAChallenge("https://edge.example", AgentPrompt{AgentDID: "did:key:zA", Missing: []string{"a"}}, now.Add(-2*time.Minute))
	for _, c := range []struct{ sid, tok string }{
		{other, ""},
		{other, tokB},
		{"kya-" + strings.Repeat("0", 64), tokA},
		{expired.SID, tokA},
		{other, "short"},
	} {
		pollAt(s, c.sid, c.tok)
	}
	if n := st.writes.Load() - before; n != 0 {
		t.Errorf("refused polls wrote %d records", n)
	}
}
