package authserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzResource: a resource the consent page will show is a URL of this
// edge with a plain path, nothing the client could write prose in.
func FuzzResource(f *testing.F) {
	s := newTestServer(f)
	for _, seed := range []string{"https://edge.example/mcp", "https://edge.example/a%20b", "https://edge.example/mcp?x=1",
		"https://EDGE.example/mcp", "https://u@edge.example/", "https://edge.example/mcp#f", "https://edge.example/mcp?"} {
		f.Add(seed)
	}
	req := httptest.NewRequest(http.MethodGet, "https://edge.example/oauth/authorize", nil)
	f.Fuzz(func(t *testing.T, res string) {
		got, desc := s.checkResource(req, res)
		if desc != "" {
			return
		}
		if res == "" {
			return
		}
		u, err := url.Parse(got)
		if err != nil || u.RawQuery != "" || u.Fragment != "" || u.User != nil || !strings.EqualFold(u.Host, "edge.example") ||
			len(u.Path) > maxResourcePath || strings.Trim(u.Path, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/") != "" ||
			strings.ContainsAny(got, " %?#") {
			t.Fatalf("accepted resource %q", res)
		}
	})
}

// FuzzCSRFToken: no token but one the server made passes.
func FuzzCSRFToken(f *testing.F) {
	s := newTestServer(f)
	c := checked{user: "alice", req: authzRequest{ClientID: "c", RedirectURI: "http://127.0.0.1/cb"}}
	now := time.Now()
	good := s.csrfToken(c, now)
	f.Add(good + "x")
	f.Add(strings.Replace(good, ".", "..", 1))
	f.Add("1.2")
	f.Fuzz(func(t *testing.T, tok string) {
		if tok != good && s.csrfOK(tok, c, now) {
			t.Fatalf("forged CSRF token accepted: %q", tok)
		}
	})
}

// TestHumanDuration: lifetimes as a person says them.
func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1 hour", 720 * time.Hour: "30 days", 90 * time.Minute: "90 minutes",
		36 * time.Hour: "36 hours", 24 * time.Hour: "1 day", 45 * time.Second: "45 seconds", time.Minute: "1 minute",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("%s: %q, want %q", d, got, want)
		}
	}
}
