package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/internal/oidctest"
)

// signInDoor is a front door whose users sign in with the built-in OIDC
// sign-in at a provider of the test.
func signInDoor(t *testing.T, lifetime time.Duration) (*frontDoor, *oidctest.Provider) {
	t.Helper()
	op := oidctest.Start(oidctest.User{Subject: "u-42", Email: "carol@example.com"})
	t.Cleanup(op.Close)
	f := newFrontDoor(t, nil, func(c *edge.Config) {
		c.AuthorizationServer.SignIn = &authserver.SignInConfig{Issuer: op.Issuer, ClientID: op.ClientID,
			ClientSecret: op.ClientSecret, SessionLifetime: lifetime}
	})
	return f, op
}

// getWith GETs u (absolute) with the cookies given.
func (f *frontDoor) getWith(u string, cookies ...*http.Cookie) *http.Response {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	res, _ := f.do(req)
	return res
}

func cookieNamed(res *http.Response, name string) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// signIn follows the login from the authorize page through the provider
// and returns the session cookie and where the edge sent the browser.
func (f *frontDoor) signIn(authorize string) (*http.Cookie, string) {
	f.t.Helper()
	res := f.getWith(f.srv.URL + authorize)
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), "/oauth/login?") {
		f.t.Fatalf("authorize without a session: %d to %q, want a redirect to the login", res.StatusCode, res.Header.Get("Location"))
	}
	res = f.getWith(f.srv.URL + res.Header.Get("Location"))
	login := cookieNamed(res, "__Host-mcpi-login")
	if res.StatusCode != http.StatusFound || login == nil || !login.Secure || !login.HttpOnly {
		f.t.Fatalf("login: %d, login cookie %+v", res.StatusCode, login)
	}
	res = f.getWith(res.Header.Get("Location")) // the provider
	if res.StatusCode != http.StatusFound {
		f.t.Fatalf("provider: %d", res.StatusCode)
	}
	res = f.getWith(res.Header.Get("Location"), login)
	sess := cookieNamed(res, "__Host-mcpi-session")
	if res.StatusCode != http.StatusSeeOther || sess == nil {
		f.t.Fatalf("callback: %d, session cookie %v", res.StatusCode, sess)
	}
	if !sess.Secure || !sess.HttpOnly || sess.SameSite != http.SameSiteLaxMode || sess.MaxAge <= 0 {
		f.t.Errorf("session cookie %+v: want Secure, HttpOnly, SameSite=Lax, short-lived", sess)
	}
	return sess, res.Header.Get("Location")
}

// TestSignInFlow: without a Caddy authentication module, a user signs in
// at the identity provider and lands on the consent page as themselves;
// the credential names the user DID of the provider's iss+sub; a forged
// or expired session cookie is no session; logout ends it.
func TestSignInFlow(t *testing.T) {
	f, op := signInDoor(t, 0)
	redirect := "http://127.0.0.1:33418/callback"
	id := f.register(redirect)
	_, challenge := pkce()
	authorize := "/oauth/authorize?" + f.authzQuery(id, redirect, challenge, "").Encode()
	sess, back := f.signIn(authorize)
	if back != authorize {
		t.Fatalf("after login the edge sent the browser to %q, want back to %q", back, authorize)
	}
	res := f.getWith(f.srv.URL+back, sess)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("consent page with the session: %d", res.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+back, nil)
	req.AddCookie(sess)
	_, body := f.do(req)
	if !strings.Contains(string(body), "carol@example.com") {
		t.Errorf("the consent page does not name the signed-in user\n%s", body)
	}

	// A forged cookie: one character changed.
	forged := *sess
	b := []byte(forged.Value)
	b[len(b)/2] ^= 1
	forged.Value = string(b)
	if res := f.getWith(f.srv.URL+back, &forged); res.StatusCode != http.StatusFound {
		t.Errorf("forged session cookie: %d, want the redirect to the login", res.StatusCode)
	}
	// The login cookie of another browser cannot finish this one's login.
	res = f.getWith(f.srv.URL + "/oauth/login?return=" + url.QueryEscape(authorize))
	res = f.getWith(res.Header.Get("Location"))
	if res := f.getWith(res.Header.Get("Location")); res.StatusCode != http.StatusForbidden || cookieNamed(res, "__Host-mcpi-session") != nil {
		t.Errorf("callback without the login cookie: %d, want 403 and no session", res.StatusCode)
	}
	if op.Tokens != 1 {
		t.Errorf("the provider exchanged %d codes, want 1 (the refused callback must not exchange)", op.Tokens)
	}

	// Logout, with the user page's token.
	req, _ = http.NewRequest(http.MethodGet, f.srv.URL+"/oauth/delegations", nil)
	req.AddCookie(sess)
	_, body = f.do(req)
	m := csrfRE.FindStringSubmatch(string(body))
	if m == nil {
		t.Fatalf("no sign-out form on the user page\n%s", body)
	}
	req, _ = http.NewRequest(http.MethodPost, f.srv.URL+"/oauth/logout", strings.NewReader(url.Values{"csrf": {m[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(sess)
	res, _ = f.do(req)
	if c := cookieNamed(res, "__Host-mcpi-session"); res.StatusCode != http.StatusOK || c == nil || c.MaxAge >= 0 {
		t.Fatalf("logout: %d, cookie %+v; want 200 and the session cookie cleared", res.StatusCode, c)
	}
	// A copy of the cookie kept after signing out is no session.
	if res := f.getWith(f.srv.URL+"/oauth/delegations", sess); res.StatusCode != http.StatusFound {
		t.Fatalf("page with the cookie of a signed-out session: %d, want the redirect to the login", res.StatusCode)
	}
}

// TestSignInExpiredSession: a session cookie past its lifetime is no
// session, even when the browser still sends it.
func TestSignInExpiredSession(t *testing.T) {
	f, _ := signInDoor(t, time.Second)
	sess, _ := f.signIn("/oauth/delegations")
	if res := f.getWith(f.srv.URL+"/oauth/delegations", sess); res.StatusCode != http.StatusOK {
		t.Fatalf("page with a fresh session: %d", res.StatusCode)
	}
	time.Sleep(2100 * time.Millisecond)
	if res := f.getWith(f.srv.URL+"/oauth/delegations", sess); res.StatusCode != http.StatusFound {
		t.Fatalf("page with an expired session: %d, want the redirect to the login", res.StatusCode)
	}
}
