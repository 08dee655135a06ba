package authserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// slowProvider is an identity provider whose discovery document takes
// delay to answer, and fails while failing is set; it counts the fetches.
type slowProvider struct {
	srv     *httptest.Server
	fetches atomic.Int64
	failing atomic.Bool
}

func newSlowProvider(t *testing.T, delay time.Duration) *slowProvider {
	p := &slowProvider{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.fetches.Add(1)
		time.Sleep(delay)
		if p.failing.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": p.srv.URL, "authorization_endpoint": p.srv.URL + "/authorize", "token_endpoint": p.srv.URL + "/token",
			"jwks_uri": p.srv.URL + "/jwks", "response_types_supported": []string{"code"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"},
		})
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// logins GETs /oauth/login n times at once and returns their statuses
// and how long the slowest took.
func logins(s *Server, n int) ([]int, time.Duration) {
	codes := make([]int, n)
	done := make(chan struct{}, n)
	start := time.Now()
	for i := range n {
		go func() {
			rec := httptest.NewRecorder()
			s.Serve(rec, httptest.NewRequest(http.MethodGet, "https://edge.example"+pathLogin, nil))
			codes[i] = rec.Code
			done <- struct{}{}
		}()
	}
	for range n {
		<-done
	}
	return codes, time.Since(start)
}

// TestLoginDiscoveryShared: concurrent anonymous logins share one fetch
// of the provider's discovery document, and after it fails, logins fail
// at once (no fetch) until the back-off has passed.
func TestLoginDiscoveryShared(t *testing.T) {
	const delay = 400 * time.Millisecond
	p := newSlowProvider(t, delay)
	p.failing.Store(true)
	s, err := New(context.Background(), Config{SignIn: &SignInConfig{Issuer: p.srv.URL, ClientID: "edge"}}, Deps{
		Store:  memStore(t),
		Origin: func(*http.Request) string { return "https://edge.example" },
		User:   func(*http.Request) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}

	codes, took := logins(s, 8)
	for _, c := range codes {
		if c != http.StatusBadGateway {
			t.Fatalf("logins while the provider fails: %v, want 502 each", codes)
		}
	}
	if n := p.fetches.Load(); n != 1 || took > 3*delay {
		t.Fatalf("8 concurrent logins made %d discovery fetches in %v, want 1 shared fetch", n, took)
	}
	// In the back-off: at once, without a fetch.
	codes, took = logins(s, 4)
	if codes[0] != http.StatusBadGateway || p.fetches.Load() != 1 || took > delay/2 {
		t.Fatalf("logins right after the failure: %v in %v, %d fetches; want 502 at once, no fetch", codes, took, p.fetches.Load())
	}

	// Once the back-off has passed, the next logins fetch again, once.
	p.failing.Store(false)
	s.signIn.mu.Lock()
	s.signIn.failed = time.Now().Add(-discoveryBackoff)
	s.signIn.mu.Unlock()
	codes, _ = logins(s, 6)
	for _, c := range codes {
		if c != http.StatusFound {
			t.Fatalf("logins once the provider answers: %v, want 302 each", codes)
		}
	}
	if n := p.fetches.Load(); n != 2 {
		t.Errorf("%d discovery fetches in all, want 2", n)
	}
}
