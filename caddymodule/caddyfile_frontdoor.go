package caddymodule

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
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
		if h.AuthorizationServer != nil {
			return true, d.Errf("authorization_server already specified")
		}
		if d.NextArg() {
			return true, d.ArgErr()
		}
		as := &AuthorizationServerConfig{}
		for nesting := d.Nesting(); d.NextBlock(nesting); {
			sub := d.Val()
			var v string
			if !d.AllArgs(&v) {
				return true, d.ArgErr()
			}
			switch sub {
			case "credential_lifetime", "refresh_lifetime":
				dur, err := caddy.ParseDuration(v)
				if err != nil || dur <= 0 {
					return true, d.Errf("%s must be a positive duration (e.g. 1h), got %q", sub, v)
				}
				if sub == "credential_lifetime" {
					as.CredentialLifetime = caddy.Duration(dur)
				} else {
					as.RefreshLifetime = caddy.Duration(dur)
				}
			case "user_id_placeholder":
				as.UserIDPlaceholder = v
			case "kya_http", "kya_http_interval":
				dur, err := caddy.ParseDuration(v)
				if err != nil || dur <= 0 {
					return true, d.Errf("%s must be a positive duration (e.g. 10m), got %q", sub, v)
				}
				if as.KYAHTTP == nil {
					as.KYAHTTP = &KYAHTTPConfig{}
				}
				if sub == "kya_http" {
					as.KYAHTTP.TTL = caddy.Duration(dur)
				} else {
					as.KYAHTTP.Interval = caddy.Duration(dur)
				}
			default:
				return true, d.Errf("unrecognized authorization_server option %q (credential_lifetime, refresh_lifetime, user_id_placeholder, kya_http, kya_http_interval)", sub)
			}
		}
		if as.KYAHTTP != nil && as.KYAHTTP.TTL == 0 {
			return true, d.Errf("kya_http_interval needs kya_http <session lifetime> (e.g. kya_http 10m), which turns the challenge on")
		}
		h.AuthorizationServer = as
		return true, nil
	}
	return false, nil
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

// defaultUserIDPlaceholder is where Caddy's authentication handlers
// (basic_auth, forward_auth with copy_headers, any caddyauth provider) put
// the signed-in user.
const defaultUserIDPlaceholder = "{http.auth.user.id}"

// signedInUser reads the signed-in user from placeholder, set by the
// authentication that ran before mcpi in the route; never from a header of
// the client.
func signedInUser(placeholder string) func(r *http.Request) string {
	if placeholder == "" {
		placeholder = defaultUserIDPlaceholder
	}
	return func(r *http.Request) string {
		repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if !ok {
			return ""
		}
		return strings.TrimSpace(repl.ReplaceKnown(placeholder, ""))
	}
}

// validate refuses a user_id_placeholder that reads the client's request
// (a header, cookie, query or body the client chose): the signed-in user
// must come from the authentication that ran, never from the client.
func (c *AuthorizationServerConfig) validate() error {
	if c == nil || c.UserIDPlaceholder == "" {
		return nil
	}
	p := c.UserIDPlaceholder
	if len(p) < 3 || p[0] != '{' || p[len(p)-1] != '}' || strings.ContainsAny(p[1:len(p)-1], "{} ") {
		return fmt.Errorf("mcpi: authorization_server user_id_placeholder must be one placeholder, such as %s", defaultUserIDPlaceholder)
	}
	if strings.HasPrefix(p, "{http.request.") {
		return fmt.Errorf("mcpi: authorization_server user_id_placeholder %s reads the client's request, which the client controls: use %s (basic_auth, caddyauth providers) or {http.reverse_proxy.header.<Name>} (the forward_auth response's header)", p, defaultUserIDPlaceholder)
	}
	return nil
}
