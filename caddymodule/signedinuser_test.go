package caddymodule

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestSignedInUserUnset: with no authentication run before mcpi the
// placeholder is unknown, and nobody is signed in (not a user named after
// the placeholder's text, whom every anonymous visitor would be).
func TestSignedInUserUnset(t *testing.T) {
	for _, p := range []string{"", "{http.auth.user.id}", "{http.reverse_proxy.header.Remote-User}"} {
		r := httptest.NewRequest("GET", "/oauth/authorize", nil)
		repl := caddy.NewReplacer()
		r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl))
		if u := signedInUser(p)(r); u != "" {
			t.Errorf("placeholder %q unset: signed in as %q, want nobody", p, u)
		}
		key := "http.auth.user.id"
		if p != "" {
			key = p[1 : len(p)-1]
		}
		// The value is the user as it is: a login is not rewritten, so
		// that two logins never become one user.
		repl.Set(key, " alice ")
		if u := signedInUser(p)(r); u != " alice " {
			t.Errorf("placeholder %q set: signed in as %q, want %q", p, u, " alice ")
		}
	}
}
