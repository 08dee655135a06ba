// Package oidctest is a minimal OpenID Connect provider for tests, on
// loopback: discovery, JWKS, an authorization endpoint that signs in one
// configured user at once (as a provider with a live session does), and a
// token endpoint that checks the client secret and PKCE and returns an
// ES256 ID token.
package oidctest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"
)

// User is who the provider signs in.
type User struct {
	Subject, Email string
}

// Provider is a running provider.
type Provider struct {
	Issuer       string
	ClientID     string
	ClientSecret string

	srv *httptest.Server
	key *ecdsa.PrivateKey

	mu    sync.Mutex
	user  User
	codes map[string]pending
	// Logins counts the authorization requests that were answered with
	// a code; Tokens the codes exchanged.
	Logins, Tokens int
}

type pending struct {
	challenge, redirect, nonce string
	user                       User
}

// Start starts a provider signing in user; Close it when done.
func Start(user User) *Provider {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	p := &Provider{ClientID: "mcpi-edge", ClientSecret: "s3cret-" + rnd(), key: key, user: user, codes: map[string]pending{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	p.Issuer = p.srv.URL
	return p
}

// Close stops the provider.
func (p *Provider) Close() { p.srv.Close() }

// SetUser changes who the next login signs in.
func (p *Provider) SetUser(u User) {
	p.mu.Lock()
	p.user = u
	p.mu.Unlock()
}

func rnd() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]any{
		"issuer": p.Issuer, "authorization_endpoint": p.Issuer + "/authorize", "token_endpoint": p.Issuer + "/token",
		"jwks_uri": p.Issuer + "/jwks", "response_types_supported": []string{"code"},
		"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"ES256"},
		"code_challenge_methods_supported": []string{"S256"},
	})
}

func pad32(b *big.Int) []byte {
	out := make([]byte, 32)
	b.FillBytes(out)
	return out
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	enc := base64.RawURLEncoding.EncodeToString
	writeJSON(w, 200, map[string]any{"keys": []map[string]string{{
		"kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256", "use": "sig",
		"x": enc(pad32(p.key.X)), "y": enc(pad32(p.key.Y)),
	}}})
}

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != p.ClientID || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Host == "" {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	code := rnd()
	p.mu.Lock()
	p.codes[code] = pending{challenge: q.Get("code_challenge"), redirect: redirect.String(), nonce: q.Get("nonce"), user: p.user}
	p.Logins++
	p.mu.Unlock()
	v := redirect.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	redirect.RawQuery = v.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, 400, map[string]string{"error": "invalid_request"})
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || secret != p.ClientSecret {
		writeJSON(w, 401, map[string]string{"error": "invalid_client"})
		return
	}
	p.mu.Lock()
	pd, ok := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code"))
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if !ok || pd.redirect != r.PostForm.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != pd.challenge {
		writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
		return
	}
	now := time.Now()
	claims := map[string]any{"iss": p.Issuer, "sub": pd.user.Subject, "aud": p.ClientID, "iat": now.Unix(),
		"exp": now.Add(5 * time.Minute).Unix(), "nonce": pd.nonce, "email": pd.user.Email}
	p.mu.Lock()
	p.Tokens++
	p.mu.Unlock()
	writeJSON(w, 200, map[string]any{"access_token": rnd(), "token_type": "Bearer", "expires_in": 300, "id_token": p.Sign(claims)})
}

// Sign makes an ES256 JWT of claims with the provider's key.
func (p *Provider) Sign(claims map[string]any) string {
	enc := base64.RawURLEncoding.EncodeToString
	h, _ := json.Marshal(map[string]string{"alg": "ES256", "kid": "k1", "typ": "JWT"})
	c, _ := json.Marshal(claims)
	input := enc(h) + "." + enc(c)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, p.key, sum[:])
	if err != nil {
		panic(err)
	}
	return input + "." + enc(append(pad32(r), pad32(s)...))
}
