package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Built-in sign-in, for sites that run no Caddy authentication module: the
// edge is an OpenID Connect relying party of the operator's identity
// provider (authorization code with PKCE and a nonce). The pending login
// is sealed in a cookie of the browser that started it (any replica may
// take the callback, and nobody can make another browser finish their
// login). The session is a sealed cookie too (session.go). The user's login subject is the provider's issuer and
// subject together: the same sub at another provider is another user.

// SignInConfig is the built-in sign-in.
type SignInConfig struct {
	// Issuer is the identity provider's issuer URL (its discovery
	// document is at Issuer/.well-known/openid-configuration).
	Issuer       string `json:"issuer"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	// SessionLifetime is how long a sign-in lasts. Default 1h, at most 12h.
	SessionLifetime time.Duration `json:"session_lifetime,omitempty"`
}

const (
	DefaultSessionLifetime = time.Hour
	maxSessionLifetime     = 12 * time.Hour
	loginLifetime          = 10 * time.Minute
	loginCookie            = "__Host-mcpi-login"
	pathLogin              = "/oauth/login"
	pathCallback           = "/oauth/callback"
	pathLogout             = "/oauth/logout"
)

func (c *SignInConfig) validate() error {
	if c == nil {
		return nil
	}
	if c.Issuer == "" || c.ClientID == "" {
		return errors.New("mcpi: authorization_server sign_in needs issuer and client_id (the identity provider's issuer URL and the client registered there)")
	}
	u, err := url.Parse(c.Issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))) {
		return fmt.Errorf("mcpi: authorization_server sign_in issuer %q must be an https URL (http only on a loopback address), without query or fragment", c.Issuer)
	}
	if c.SessionLifetime < 0 || c.SessionLifetime > maxSessionLifetime {
		return errors.New("mcpi: authorization_server sign_in session_lifetime must be at most 12h")
	}
	return nil
}

type signIn struct {
	cfg    SignInConfig
	seal   *sealer
	client *http.Client

	mu       sync.Mutex
	provider *oidc.Provider // discovered at the first login
	fetching chan struct{}  // closed when the discovery under way ends
	failed   time.Time      // when the last discovery failed
	lastErr  error
}

// discoveryBackoff is how long after a failed discovery logins fail at
// once, rather than each waiting for the provider's timeout again.
const discoveryBackoff = 5 * time.Second

func newSignIn(cfg *SignInConfig, sec *secrets) (*signIn, error) {
	if cfg == nil {
		return nil, nil
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := *cfg
	if c.SessionLifetime == 0 {
		c.SessionLifetime = DefaultSessionLifetime
	}
	seal, err := newSealer(mac(sec.csrf, "session cookies"))
	if err != nil {
		return nil, err
	}
	// The operator's own provider, so not the SSRF-guarded client: it
	// may well be on a private address.
	return &signIn{cfg: c, seal: seal, client: &http.Client{Timeout: 10 * time.Second}}, nil
}

// discover returns the provider, fetching its discovery document once it
// answers. Concurrent logins share one fetch and its outcome; after a
// failure, logins fail at once for discoveryBackoff, then the next one
// fetches again. So anonymous logins cannot queue up behind the
// provider's timeout.
func (si *signIn) discover(ctx context.Context) (*oidc.Provider, error) {
	si.mu.Lock()
	if si.provider != nil {
		defer si.mu.Unlock()
		return si.provider, nil
	}
	if si.lastErr != nil && time.Since(si.failed) < discoveryBackoff {
		defer si.mu.Unlock()
		return nil, fmt.Errorf("discovery failed less than %s ago (not retried yet): %w", discoveryBackoff, si.lastErr)
	}
	if ch := si.fetching; ch != nil {
		si.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		si.mu.Lock()
		defer si.mu.Unlock()
		if si.provider != nil {
			return si.provider, nil
		}
		return nil, si.lastErr
	}
	ch := make(chan struct{})
	si.fetching = ch
	si.mu.Unlock()
	// Not the caller's cancellation: others wait on this fetch. The
	// client's timeout bounds it.
	p, err := oidc.NewProvider(oidc.ClientContext(context.WithoutCancel(ctx), si.client), si.cfg.Issuer)
	si.mu.Lock()
	defer si.mu.Unlock()
	si.fetching = nil
	close(ch)
	if err != nil {
		si.failed, si.lastErr = time.Now(), err
		return nil, err
	}
	si.provider, si.lastErr = p, nil
	return p, nil
}

func (si *signIn) oauth(p *oidc.Provider, origin string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: si.cfg.ClientID, ClientSecret: si.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: origin + pathCallback, Scopes: []string{oidc.ScopeOpenID, "profile", "email"},
	}
}

// pendingLogin is what the callback needs, sealed in the login cookie of
// the browser that started the login: an unauthenticated request writes
// nothing shared, and only that browser can finish the login.
type pendingLogin struct {
	State    string `json:"t"`
	Verifier string `json:"v"`
	Nonce    string `json:"n"`
	Return   string `json:"r"`
	Expires  int64  `json:"e"`
}

// maxReturnLen keeps the login cookie under browsers' 4 KiB: a longer
// return address (a very long client_id) is dropped, and the user starts
// again from the application, now signed in.
const maxReturnLen = 2500

// returnPath accepts only the edge's own pages as where to go after login.
func returnPath(p string) string {
	if len(p) <= maxReturnLen && (strings.HasPrefix(p, pathAuthorize+"?") || p == pathDelegations) {
		return p
	}
	return pathDelegations
}

// serveLogin starts a login: GET /oauth/login?return=<path>.
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	p, err := s.signIn.discover(r.Context())
	if err != nil {
		s.deps.Logger.Warn("identity provider discovery", zapErr(err))
		s.errorPage(w, r, http.StatusBadGateway, "the identity provider could not be reached; try again shortly")
		return
	}
	pl := pendingLogin{State: randomToken(), Verifier: oauth2.GenerateVerifier(), Nonce: randomToken(),
		Return: returnPath(r.URL.Query().Get("return")), Expires: time.Now().Add(loginLifetime).Unix()}
	body, _ := json.Marshal(pl)
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: s.signIn.seal.seal(s.cookieAAD(r, loginCookie), body), Path: "/",
		MaxAge: int(loginLifetime / time.Second), Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	to := s.signIn.oauth(p, s.issuer(r)).AuthCodeURL(pl.State, oauth2.S256ChallengeOption(pl.Verifier), oidc.Nonce(pl.Nonce))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, to, http.StatusFound)
}

// serveCallback finishes a login: the provider's redirect with code and
// state, in the browser holding the login cookie of that state.
func (s *Server) serveCallback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	q := r.URL.Query()
	state, code := q.Get("state"), q.Get("code")
	var pl pendingLogin
	ck, cerr := r.Cookie(loginCookie)
	var raw []byte
	ok := cerr == nil
	if ok {
		raw, ok = s.signIn.seal.open(s.cookieAAD(r, loginCookie), ck.Value)
	}
	if !ok || readStrict(raw, &pl, "t", "v", "n", "r", "e") != nil || state == "" || !macEqualString(state, pl.State) {
		s.errorPage(w, r, http.StatusForbidden, "this sign-in was not started in this browser: start again from your application in this one")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	if time.Now().Unix() >= pl.Expires {
		s.errorPage(w, r, http.StatusForbidden, "this sign-in took more than 10 minutes: start again from your application")
		return
	}
	if e := q.Get("error"); e != "" {
		s.errorPage(w, r, http.StatusForbidden, "the identity provider refused the sign-in: start again from your application")
		return
	}
	if code == "" {
		s.errorPage(w, r, http.StatusBadRequest, "the sign-in answer has no code: start again from your application")
		return
	}
	p, err := s.signIn.discover(r.Context())
	if err != nil {
		s.errorPage(w, r, http.StatusBadGateway, "the identity provider could not be reached; try again shortly")
		return
	}
	ctx := oidc.ClientContext(r.Context(), s.signIn.client)
	tok, err := s.signIn.oauth(p, s.issuer(r)).Exchange(ctx, code, oauth2.VerifierOption(pl.Verifier))
	if err != nil {
		s.deps.Logger.Warn("identity provider code exchange", zapErr(err))
		s.errorPage(w, r, http.StatusBadGateway, "the identity provider did not accept the sign-in code: start again from your application")
		return
	}
	rawID, _ := tok.Extra("id_token").(string)
	idt, err := p.VerifierContext(ctx, &oidc.Config{ClientID: s.signIn.cfg.ClientID}).Verify(ctx, rawID)
	if err != nil || !macEqualString(idt.Nonce, pl.Nonce) || idt.Subject == "" {
		if err != nil {
			s.deps.Logger.Warn("ID token refused", zapErr(err))
		}
		s.errorPage(w, r, http.StatusForbidden, "the identity provider's answer could not be verified: start again from your application")
		return
	}
	var claims struct {
		Email string `json:"email"`
		Name  string `json:"name"`
		Pref  string `json:"preferred_username"`
	}
	_ = idt.Claims(&claims)
	display := firstNonEmpty(claims.Email, claims.Pref, claims.Name, idt.Subject)
	s.setSession(w, r, session{Subject: oidcSubject(idt.Issuer, idt.Subject), Name: display})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, pl.Return, http.StatusSeeOther)
}

// oidcSubject is the login subject of a provider's user: issuer and sub
// together, as OpenID Connect Core §5.7 asks.
func oidcSubject(iss, sub string) string { return "oidc:" + iss + "#" + sub }

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			if len(v) > 200 {
				v = v[:200]
			}
			return v
		}
	}
	return ""
}

// redirectToLogin sends a browser without a session to the login, to come
// back to this page.
func (s *Server) redirectToLogin(w http.ResponseWriter, r *http.Request) {
	ret := s.deps.Path(r)
	if r.URL.RawQuery != "" {
		ret += "?" + r.URL.RawQuery
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, pathLogin+"?"+url.Values{"return": {ret}}.Encode(), http.StatusFound)
}
