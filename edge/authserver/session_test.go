package authserver

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

func newSignInServer(t testing.TB) *Server {
	t.Helper()
	st := challenge.NewMemoryStore(context.Background())
	t.Cleanup(func() { _ = st.Close() })
	s, err := New(context.Background(), Config{SignIn: &SignInConfig{Issuer: "https://idp.example", ClientID: "edge"}}, Deps{
		Store:  st,
		Origin: func(*http.Request) string { return "https://edge.example" },
		User:   func(*http.Request) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func withCookie(v string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "https://edge.example/oauth/delegations", nil)
	r.Header.Set("Cookie", sessionCookie+"="+v)
	return r
}

// TestSessionCookies: only a cookie this server sealed, for the session
// cookie, holding a subject and an expiry still ahead, is a session.
func TestSessionCookies(t *testing.T) {
	s := newSignInServer(t)
	now := time.Now()
	seal := func(name, json string) string { return s.signIn.seal.seal(aad(name), []byte(json)) }
	exp := func(d time.Duration) string { return itoa(now.Add(d).Unix()) }
	good := seal(sessionCookie, `{"s":"oidc:https://idp.example#1","i":"x","e":`+exp(time.Hour)+`}`)
	for name, tc := range map[string]struct {
		cookie string
		ok     bool
	}{
		"sealed by this server":  {good, true},
		"empty":                  {"", false},
		"not base64url":          {"%%%", false},
		"too short":              {"AAAA", false},
		"too long":               {strings.Repeat("A", maxCookieLen+1), false},
		"one bit changed":        {flip(good), false},
		"sealed for the login":   {seal(loginCookie, `{"s":"x","i":"x","e":`+exp(time.Hour)+`}`), false},
		"no id":                  {seal(sessionCookie, `{"s":"x","e":`+exp(time.Hour)+`}`), false},
		"expired":                {seal(sessionCookie, `{"s":"x","i":"x","e":`+exp(-time.Second)+`}`), false},
		"no subject":             {seal(sessionCookie, `{"s":"","e":`+exp(time.Hour)+`}`), false},
		"not JSON":               {seal(sessionCookie, `x`), false},
		"member twice":           {seal(sessionCookie, `{"s":"a","S":"b","e":`+exp(time.Hour)+`}`), false},
		"expiry a string":        {seal(sessionCookie, `{"s":"a","e":"9999999999"}`), false},
		"another site's":         {s.signIn.seal.seal(sessionCookie+" https://other.example https://idp.example", []byte(`{"s":"x","i":"x","e":`+exp(time.Hour)+`}`)), false},
		"another provider's":     {s.signIn.seal.seal(sessionCookie+" https://edge.example https://idp2.example", []byte(`{"s":"x","i":"x","e":`+exp(time.Hour)+`}`)), false},
		"another server's":       {newSignInServer(t).signIn.seal.seal(aad(sessionCookie), []byte(`{"s":"x","i":"x","e":`+exp(time.Hour)+`}`)), false},
		"sealed under no key at": {base64.RawURLEncoding.EncodeToString(make([]byte, 64)), false},
	} {
		if _, ok := s.session(withCookie(tc.cookie), now); ok != tc.ok {
			t.Errorf("%s: session %v, want %v", name, ok, tc.ok)
		}
	}
	// Two session cookies: one may have been planted by a sibling domain.
	r := withCookie(good)
	r.Header.Set("Cookie", sessionCookie+"="+good+"; "+sessionCookie+"="+good)
	if _, ok := s.session(r, now); ok {
		t.Error("two session cookies were taken as a session")
	}
}

// TestSignInConfig: issuer https (http on loopback only), client id
// required, session lifetime at most 12h.
func TestSignInConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		c  SignInConfig
		ok bool
	}{
		"https":             {SignInConfig{Issuer: "https://idp.example", ClientID: "c"}, true},
		"http loopback":     {SignInConfig{Issuer: "http://127.0.0.1:5556", ClientID: "c"}, true},
		"http elsewhere":    {SignInConfig{Issuer: "http://idp.example", ClientID: "c"}, false},
		"no client id":      {SignInConfig{Issuer: "https://idp.example"}, false},
		"no issuer":         {SignInConfig{ClientID: "c"}, false},
		"query":             {SignInConfig{Issuer: "https://idp.example/?x=1", ClientID: "c"}, false},
		"lifetime too long": {SignInConfig{Issuer: "https://idp.example", ClientID: "c", SessionLifetime: 13 * time.Hour}, false},
	} {
		if err := tc.c.validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", name, err, tc.ok)
		}
	}
}

// TestReturnPaths: after login only the edge's own pages.
func TestReturnPaths(t *testing.T) {
	for in, want := range map[string]string{
		"/oauth/authorize?client_id=x": "/oauth/authorize?client_id=x",
		"/oauth/delegations":           "/oauth/delegations",
		"https://evil.example/":        "/oauth/delegations",
		"//evil.example/":              "/oauth/delegations",
		"/oauth/authorize":             "/oauth/delegations",
		"":                             "/oauth/delegations",
		"/oauth/authorize?" + strings.Repeat("x", maxReturnLen): "/oauth/delegations",
	} {
		if got := returnPath(in); got != want {
			t.Errorf("returnPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSessionCookie(f *testing.F) {
	s := newSignInServer(f)
	// Sealed but expired at the fuzzed time: mutations must not revive it.
	f.Add(s.signIn.seal.seal(aad(sessionCookie), []byte(`{"s":"a","i":"x","e":1}`)))
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, v string) {
		if _, ok := s.session(withCookie(v), time.Unix(100, 0)); ok {
			t.Fatalf("a cookie the server did not seal is a session: %q", v)
		}
	})
}

// aad is what the test server binds a cookie named name to.
func aad(name string) string { return name + " https://edge.example https://idp.example" }

func flip(s string) string {
	b := []byte(s)
	b[len(b)/2] ^= 1
	return string(b)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestLoginCallbacks: the callback goes on only in the browser holding the
// sealed login cookie of that state, within 10 minutes; anything else is
// refused before the provider is asked for anything.
func TestLoginCallbacks(t *testing.T) {
	s := newSignInServer(t)
	now := time.Now()
	login := func(state string, exp time.Time) string {
		return s.signIn.seal.seal(aad(loginCookie), []byte(`{"t":"`+state+`","v":"v","n":"n","r":"/oauth/delegations","e":`+itoa(exp.Unix())+`}`))
	}
	good := login("st", now.Add(time.Minute))
	for name, tc := range map[string]struct{ cookie, state string }{
		"no cookie":               {"", "st"},
		"another state":           {good, "st2"},
		"no state":                {good, ""},
		"expired":                 {login("st", now.Add(-time.Second)), "st"},
		"changed cookie":          {flip(good), "st"},
		"a session cookie's seal": {s.signIn.seal.seal(aad(sessionCookie), []byte(`{"t":"st","v":"v","n":"n","r":"/","e":9999999999}`)), "st"},
		"member twice":            {s.signIn.seal.seal(aad(loginCookie), []byte(`{"t":"x","T":"st","v":"v","n":"n","r":"/","e":9999999999}`)), "st"},
	} {
		r := httptest.NewRequest(http.MethodGet, "https://edge.example/oauth/callback?code=c&state="+tc.state, nil)
		if tc.cookie != "" {
			r.Header.Set("Cookie", loginCookie+"="+tc.cookie)
		}
		w := httptest.NewRecorder()
		s.serveCallback(w, r)
		if w.Code != http.StatusForbidden || strings.Contains(w.Header().Get("Set-Cookie"), sessionCookie+"=") {
			t.Errorf("%s: %d %q, want 403 and no session", name, w.Code, w.Header().Get("Set-Cookie"))
		}
	}
}

func FuzzLoginCookie(f *testing.F) {
	s := newSignInServer(f)
	f.Add(s.signIn.seal.seal(aad(loginCookie), []byte(`{"t":"st","v":"v","n":"n","r":"/","e":1}`)), "st")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, cookie, state string) {
		r := httptest.NewRequest(http.MethodGet, "https://edge.example/oauth/callback?code=c", nil)
		r.URL.RawQuery = url.Values{"code": {"c"}, "state": {state}}.Encode()
		r.Header.Set("Cookie", loginCookie+"="+cookie)
		w := httptest.NewRecorder()
		s.serveCallback(w, r)
		if w.Code != http.StatusForbidden && w.Code != http.StatusBadRequest {
			t.Fatalf("a login cookie the server did not seal (or expired) went on: %d", w.Code)
		}
	})
}
