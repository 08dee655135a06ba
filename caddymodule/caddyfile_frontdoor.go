package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
)

// trustAuthorizationServer is the trust entry for the users whose DIDs the
// edge's own authorization server hosts.
const trustAuthorizationServer = "authorization_server"

// unmarshalFrontDoor parses the front door subdirectives:
//
//	authorization_server {
//	    credential_lifetime 1h
//	    refresh_lifetime 720h
//	    user_id_placeholder {http.auth.user.id}
//	    kya_http 10m           # draft-kya-http-02 challenge and pickup, sessions of 10m
//	    kya_http_interval 3s
//	}
//	trust authorization_server
func (h *Handler) unmarshalFrontDoor(d *caddyfile.Dispenser, name string) (bool, error) {
	switch name {
	case "trust":
		// Only the line `trust authorization_server`; other trust lines
		// are the main parser's.
		if !d.NextArg() {
			return false, nil
		}
		if d.Val() != trustAuthorizationServer {
			d.Prev()
			return false, nil
		}
		if d.NextArg() {
			return true, d.Errf("trust %s stands alone on its line; list issuer DIDs on another trust line", trustAuthorizationServer)
		}
		if h.TrustAuthorizationServer {
			return true, d.Errf("trust %s already specified", trustAuthorizationServer)
		}
		h.TrustAuthorizationServer = true
		return true, nil
	case "authorization_server":
		if d.NextArg() {
			return true, d.ArgErr()
		}
		as, err := unmarshalAuthorizationServer(d)
		h.AuthorizationServer = as
		return true, err
	}
	return false, nil
}

// unmarshalAuthorizationServer parses the authorization_server block. A
// setting given twice takes its last value.
func unmarshalAuthorizationServer(d *caddyfile.Dispenser) (*AuthorizationServerConfig, error) {
	as := &AuthorizationServerConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if sub == "sign_in" {
			si, err := unmarshalSignIn(d)
			if err != nil {
				return nil, err
			}
			as.SignIn = si
			continue
		}
		var v string
		if !d.AllArgs(&v) {
			return nil, d.ArgErr()
		}
		var err error
		switch sub {
		case "credential_lifetime":
			as.CredentialLifetime, err = positiveDuration(d, sub, v, "1h")
		case "refresh_lifetime":
			as.RefreshLifetime, err = positiveDuration(d, sub, v, "1h")
		case "user_id_placeholder":
			as.UserIDPlaceholder = v
		case "kya_http", "kya_http_interval":
			if as.KYAHTTP == nil {
				as.KYAHTTP = &KYAHTTPConfig{}
			}
			dst := &as.KYAHTTP.TTL
			if sub == "kya_http_interval" {
				dst = &as.KYAHTTP.Interval
			}
			*dst, err = positiveDuration(d, sub, v, "10m")
		default:
			return nil, d.Errf("unrecognized authorization_server option %q (credential_lifetime, refresh_lifetime, user_id_placeholder, sign_in, kya_http, kya_http_interval)", sub)
		}
		if err != nil {
			return nil, err
		}
	}
	if as.KYAHTTP != nil && as.KYAHTTP.TTL == 0 {
		return nil, d.Errf("kya_http_interval needs kya_http <session lifetime> (e.g. kya_http 10m), which turns the challenge on")
	}
	return as, nil
}

// AuthorizationServerConfig is the front door: the edge as the OAuth 2.1
// authorization server of this route (docs/configuration.md).
type AuthorizationServerConfig struct {
	// Lifetime of an issued credential (the access token). Default: 1h.
	CredentialLifetime caddy.Duration `json:"credential_lifetime,omitempty"`
	// How long the refresh tokens of one consent live. Default: 720h.
	RefreshLifetime caddy.Duration `json:"refresh_lifetime,omitempty"`
	// Placeholder holding the signed-in user's subject, set by the
	// authentication handler that runs before mcpi on the authorize path.
	// Default: {http.auth.user.id}.
	UserIDPlaceholder string `json:"user_id_placeholder,omitempty"`
	// Built-in sign-in (OIDC) for sites without an authentication
	// module; the signed-in user is then the session's when the
	// placeholder is empty.
	SignIn *SignInConfig `json:"sign_in,omitempty"`
	// KYAHTTP, when set, answers KYA-OS agents that ask for it with the
	// draft-kya-http-02 challenge and serves its pickup endpoint.
	KYAHTTP *KYAHTTPConfig `json:"kya_http,omitempty"`
}

// KYAHTTPConfig is the draft-kya-http-02 challenge of the front door.
type KYAHTTPConfig struct {
	// How long a challenge's session lasts (consent, then pickup).
	// Default and maximum: 10m.
	TTL caddy.Duration `json:"ttl,omitempty"`
	// The poll interval the challenge asks for. Default: 3s.
	Interval caddy.Duration `json:"interval,omitempty"`
}

// edgeConfig is c as the edge's authorization server takes it; nil is off.
func (c *AuthorizationServerConfig) edgeConfig() *authserver.Config {
	if c == nil {
		return nil
	}
	cfg := &authserver.Config{
		CredentialLifetime: time.Duration(c.CredentialLifetime),
		RefreshLifetime:    time.Duration(c.RefreshLifetime),
	}
	if si := c.SignIn; si != nil {
		cfg.SignIn = &authserver.SignInConfig{Issuer: si.Issuer, ClientID: si.ClientID, ClientSecret: si.ClientSecret,
			SessionLifetime: time.Duration(si.SessionLifetime)}
	}
	if k := c.KYAHTTP; k != nil {
		cfg.KYAHTTP = &authserver.KYAHTTPConfig{TTL: time.Duration(k.TTL), Interval: time.Duration(k.Interval)}
	}
	return cfg
}

// defaultUserIDPlaceholder is where Caddy's authentication handlers
// (basic_auth, forward_auth with copy_headers, any caddyauth provider) put
// the signed-in user.
const defaultUserIDPlaceholder = "{http.auth.user.id}"

// userPlaceholderPrefixes are the placeholders user_id_placeholder may
// name: only authentication sets them. {http.auth.user.*} is what Caddy's
// authentication handlers (basic_auth, caddyauth providers) set;
// {http.reverse_proxy.header.*} holds the headers of a reverse_proxy's
// answer, which forward_auth's copy_headers reads from the identity
// provider; {http.request.tls.client.*} is the client certificate, read
// only when Caddy verified it. Everything else (request headers, cookies,
// query, vars, map outputs, regexp captures) can carry what the client
// sent.
var userPlaceholderPrefixes = []string{"http.auth.user.", "http.reverse_proxy.header.", "http.request.tls.client."}

const tlsClientPrefix = "http.request.tls.client."

// signedInUser reads the signed-in user from placeholder, set by the
// authentication that ran before mcpi in the route; never from a header of
// the client. A placeholder that is not set, is empty, or holds placeholder
// text (an unreplaced one) is nobody: the consent page then answers 401.
// The value is used as it is, never trimmed or rewritten.
func signedInUser(placeholder string) func(r *http.Request) string {
	if placeholder == "" {
		placeholder = defaultUserIDPlaceholder
	}
	key := strings.TrimSuffix(strings.TrimPrefix(placeholder, "{"), "}")
	tlsClient := strings.HasPrefix(key, tlsClientPrefix)
	return func(r *http.Request) string {
		repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if !ok {
			return ""
		}
		// Caddy answers the client certificate's fields with those of an
		// empty certificate when there is none (a fingerprint included),
		// and with the fields of an unverified one under client_auth
		// mode request: only a chain Caddy verified names a user.
		if tlsClient && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			return ""
		}
		v, known := repl.GetString(key)
		if !known || strings.TrimSpace(v) == "" || strings.ContainsAny(v, "{}") {
			return ""
		}
		return v
	}
}

// validate refuses a user_id_placeholder that authentication does not set:
// the signed-in user must come from the authentication that ran, never
// from anything the client sent.
func (c *AuthorizationServerConfig) validate() error {
	if c == nil || c.UserIDPlaceholder == "" {
		return nil
	}
	p := c.UserIDPlaceholder
	if len(p) < 3 || p[0] != '{' || p[len(p)-1] != '}' || strings.ContainsAny(p[1:len(p)-1], "{} ") {
		return fmt.Errorf("mcpi: authorization_server user_id_placeholder must be one placeholder, such as %s", defaultUserIDPlaceholder)
	}
	key := p[1 : len(p)-1]
	for _, prefix := range userPlaceholderPrefixes {
		if strings.HasPrefix(key, prefix) && len(key) > len(prefix) {
			return nil
		}
	}
	return fmt.Errorf("mcpi: authorization_server user_id_placeholder %s is not set by authentication, so a client could choose the user it names: "+
		"use {http.auth.user.id} (basic_auth, caddyauth providers; the default), {http.auth.user.<field>}, "+
		"{http.reverse_proxy.header.<Name>} (the identity provider's answer header that forward_auth copies) "+
		"or {http.request.tls.client.<field>} (a client certificate Caddy verified, with client_auth)", p)
}
