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
			default:
				return true, d.Errf("unrecognized authorization_server option %q (credential_lifetime, refresh_lifetime, user_id_placeholder)", sub)
			}
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
}

// edgeConfig is c as the edge's authorization server takes it; nil is off.
func (c *AuthorizationServerConfig) edgeConfig() *authserver.Config {
	if c == nil {
		return nil
	}
	return &authserver.Config{
		CredentialLifetime: time.Duration(c.CredentialLifetime),
		RefreshLifetime:    time.Duration(c.RefreshLifetime),
	}
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
