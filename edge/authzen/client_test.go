package authzen

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
)

func testRequest(args map[string]any) *Request {
	return &Request{
		Subject:  Entity{Type: "agent", ID: "did:key:zAgent"},
		Action:   Action{Name: "tools/call"},
		Resource: Entity{Type: "mcp_tool", ID: "transfer"},
		Context:  map[string]any{"arguments": args},
	}
}

// pdp serves answer for every evaluation and counts them.
func pdp(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != EvaluationPath || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s (%s): want a JSON POST to %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"), EvaluationPath)
		}
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func answer(body string, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		io.WriteString(w, body)
	}
}

func client(t *testing.T, c Config) *Client {
	t.Helper()
	cl, err := New(&c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestEvaluateSendsTheRequest(t *testing.T) {
	var got map[string]any
	s, _ := pdp(t, func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		answer(`{"decision":true}`)(w, r)
	})
	d, cached, err := client(t, Config{URL: s.URL, AllowPrivate: true}).Evaluate(context.Background(), testRequest(map[string]any{"amount": 5}))
	if err != nil || !d.Allowed || cached {
		t.Fatalf("Evaluate = %+v, %v, %v", d, cached, err)
	}
	want := `{"action":{"name":"tools/call"},"context":{"arguments":{"amount":5}},"resource":{"id":"transfer","type":"mcp_tool"},"subject":{"id":"did:key:zAgent","type":"agent"}}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Fatalf("PDP got %s\nwant %s", b, want)
	}
}

func TestEvaluateFailsClosed(t *testing.T) {
	// The PDP stalls for 10s against a 200ms timeout; the refusal must come
	// well before (5s: a loaded machine under -race is slow, not stuck).
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want error
	}{
		{"timeout", slow, ErrPDP},
		{"status 500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", 500) }, ErrPDP},
		{"status 403", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(403) }, ErrPDP},
		{"redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }, ErrPDP},
		{"not JSON", answer(`{"decision":true}`, "Content-Type", "text/plain"), ErrAnswer},
		{"malformed", answer(`{"decision":"yes"}`), ErrAnswer},
		{"too large", answer(`{"decision":true,"x":"` + strings.Repeat("a", MaxAnswerSize) + `"}`), ErrAnswer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := pdp(t, tc.h)
			cl := client(t, Config{URL: s.URL, AllowPrivate: true, Timeout: duration.Duration(200 * time.Millisecond), CacheTTL: duration.Duration(time.Minute)})
			start := time.Now()
			d, _, err := cl.Evaluate(context.Background(), testRequest(nil))
			if !errors.Is(err, tc.want) || d.Allowed {
				t.Fatalf("Evaluate = %+v, %v; want %v", d, err, tc.want)
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %s, past the timeout", time.Since(start))
			}
			if cl.cache.len() != 0 {
				t.Fatal("an error was cached")
			}
		})
	}
}

func TestEvaluatePrivateAddressNeedsAllowPrivate(t *testing.T) {
	s := httptest.NewTLSServer(answer(`{"decision":true}`))
	defer s.Close()
	cl, err := New(&Config{URL: s.URL}, s.Client())
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := cl.Evaluate(context.Background(), testRequest(nil)); !errors.Is(err, ErrPDP) || !strings.Contains(err.Error(), "allow_private") || d.Allowed {
		t.Fatalf("Evaluate on loopback without allow_private = %+v, %v", d, err)
	}
}

func TestEvaluateCache(t *testing.T) {
	s, n := pdp(t, answer(`{"decision":false,"context":{"reason_user":{"en":"no"}}}`))
	cl := client(t, Config{URL: s.URL, AllowPrivate: true, CacheTTL: duration.Duration(time.Minute), CacheSize: 2})
	now := time.Now()
	cl.now = func() time.Time { return now }
	ask := func(amount int) (Decision, bool) {
		d, cached, err := cl.Evaluate(context.Background(), testRequest(map[string]any{"amount": amount}))
		if err != nil {
			t.Fatal(err)
		}
		return d, cached
	}
	ask(1)
	if d, cached := ask(1); !cached || d.Reason != "no" || n.Load() != 1 {
		t.Fatalf("second identical ask: %+v cached=%v, %d PDP calls", d, cached, n.Load())
	}
	if _, cached := ask(2); cached {
		t.Fatal("other arguments answered from the cache")
	}
	ask(3)
	if l := cl.cache.len(); l > 2 {
		t.Fatalf("cache holds %d, bound 2", l)
	}
	now = now.Add(2 * time.Minute)
	if _, cached := ask(3); cached {
		t.Fatal("an expired decision was used")
	}
}

func TestEvaluateNoStoreIsNotCached(t *testing.T) {
	s, n := pdp(t, answer(`{"decision":true}`, "Cache-Control", "no-store"))
	cl := client(t, Config{URL: s.URL, AllowPrivate: true, CacheTTL: duration.Duration(time.Minute)})
	for range 2 {
		if _, cached, err := cl.Evaluate(context.Background(), testRequest(nil)); err != nil || cached {
			t.Fatal(cached, err)
		}
	}
	if n.Load() != 2 {
		t.Fatalf("%d PDP calls, want 2", n.Load())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, "needs the URL"},
		{Config{URL: "pdp.example.com"}, "absolute URL"},
		{Config{URL: "https://u:p@pdp.example.com"}, "without userinfo"},
		{Config{URL: "http://pdp.example.com"}, "allow_private"},
		{Config{URL: "ftp://pdp.example.com"}, "must be https"},
		{Config{URL: "https://pdp.example.com", Timeout: duration.Duration(time.Hour)}, "timeout"},
		{Config{URL: "https://pdp.example.com", CacheTTL: -1}, "cache_ttl"},
		{Config{URL: "https://pdp.example.com", CacheSize: -1}, "cache_size"},
		{Config{URL: "https://pdp.example.com", Message: "a\nb"}, "one line"},
	} {
		if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v; want an error about %q", tc.c, err, tc.want)
		}
	}
	c := Config{URL: "https://pdp.example.com"}
	if u, err := c.endpoint(); err != nil || u != "https://pdp.example.com/access/v1/evaluation" {
		t.Fatalf("endpoint = %q, %v", u, err)
	}
}

// TestEvaluateSendsTheCredential: the bearer or the header reaches the PDP
// on every request, the cache's misses and all.
func TestEvaluateSendsTheCredential(t *testing.T) {
	for _, tc := range []struct {
		name, header, want string
		c                  Config
	}{
		{name: "bearer", header: "Authorization", want: "Bearer tok-1", c: Config{Bearer: "tok-1"}},
		{name: "header", header: "X-Api-Key", want: "key-1", c: Config{Header: &Header{Name: "x-api-key", Value: "key-1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, n := pdp(t, func(w http.ResponseWriter, r *http.Request) {
				if got := r.Header.Values(tc.header); len(got) != 1 || got[0] != tc.want {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				answer(`{"decision":true}`)(w, r)
			})
			tc.c.URL, tc.c.AllowPrivate = s.URL, true
			cl := client(t, tc.c)
			for i := range 2 {
				d, _, err := cl.Evaluate(context.Background(), testRequest(map[string]any{"n": i}))
				if err != nil || !d.Allowed {
					t.Fatalf("evaluation %d: %+v, %v", i, d, err)
				}
			}
			if n.Load() != 2 {
				t.Errorf("the PDP was asked %d times, want 2", n.Load())
			}
		})
	}
	// Without the credential, the PDP's 401 is no decision.
	s, _ := pdp(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	if _, _, err := client(t, Config{URL: s.URL, AllowPrivate: true}).Evaluate(context.Background(), testRequest(nil)); !errors.Is(err, ErrPDP) || strings.Contains(err.Error(), "tok-1") {
		t.Errorf("a 401: %v, want ErrPDP", err)
	}
}

func TestConfigValidateCredential(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Bearer: "tok-zz", Header: &Header{Name: "X-K", Value: "key-zz"}}, "not both"},
		{Config{Bearer: "tok zz"}, "without spaces"},
		{Config{Bearer: "a\r\nX-Evil: 1"}, "without spaces"},
		{Config{Header: &Header{Name: "X K", Value: "v"}}, "not a header name"},
		{Config{Header: &Header{Name: "", Value: "v"}}, "not a header name"},
		{Config{Header: &Header{Name: "host", Value: "v"}}, "of the request itself"},
		{Config{Header: &Header{Name: "Content-Length", Value: "v"}}, "of the request itself"},
		{Config{Header: &Header{Name: "X-K", Value: ""}}, "must be non-empty"},
		{Config{Header: &Header{Name: "X-K", Value: "v\x00"}}, "must be non-empty"},
	} {
		tc.c.URL = "https://pdp.example.com"
		err := tc.c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
		if err != nil && (tc.c.Bearer != "" && strings.Contains(err.Error(), tc.c.Bearer) || tc.c.Header != nil && tc.c.Header.Value != "" && strings.Contains(err.Error(), tc.c.Header.Value)) {
			t.Errorf("the error repeats the secret: %v", err)
		}
	}
}
