package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// SignInConfig is the front door's built-in sign-in (OIDC), for sites
// without a Caddy authentication module. Issuer, client id and secret may
// be {env.*} placeholders, read when the config loads.
type SignInConfig struct {
	Issuer          string         `json:"issuer"`
	ClientID        string         `json:"client_id"`
	ClientSecret    string         `json:"client_secret,omitempty"`
	SessionLifetime caddy.Duration `json:"session_lifetime,omitempty"`
}

// unmarshalSignIn parses
//
//	sign_in oidc {
//	    issuer https://idp.example.com
//	    client_id {env.MCPI_OIDC_CLIENT_ID}
//	    client_secret {env.MCPI_OIDC_CLIENT_SECRET}
//	    session_lifetime 1h
//	}
func unmarshalSignIn(d *caddyfile.Dispenser) (*SignInConfig, error) {
	if !d.NextArg() || d.Val() != "oidc" {
		return nil, d.Err("sign_in needs its protocol: sign_in oidc { issuer …; client_id …; client_secret … }")
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	si := &SignInConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		var v string
		if !d.AllArgs(&v) {
			return nil, d.ArgErr()
		}
		switch sub {
		case "issuer":
			si.Issuer = v
		case "client_id":
			si.ClientID = v
		case "client_secret":
			si.ClientSecret = v
		case "session_lifetime":
			var err error
			if si.SessionLifetime, err = positiveDuration(d, sub, v, "1h"); err != nil {
				return nil, err
			}
		default:
			return nil, d.Errf("unrecognized sign_in option %q (issuer, client_id, client_secret, session_lifetime)", sub)
		}
	}
	if si.Issuer == "" || si.ClientID == "" {
		return nil, d.Err("sign_in oidc needs issuer and client_id")
	}
	return si, nil
}

// resolveSignIn replaces the global placeholders ({env.*}) of the sign-in
// settings; an unset or empty one is an error naming it, never an empty
// secret.
func resolveSignIn(cfg *edge.Config) error {
	if cfg.AuthorizationServer == nil || cfg.AuthorizationServer.SignIn == nil {
		return nil
	}
	si := *cfg.AuthorizationServer.SignIn
	repl := caddy.NewReplacer()
	for name, f := range map[string]*string{"issuer": &si.Issuer, "client_id": &si.ClientID, "client_secret": &si.ClientSecret} {
		if *f == "" {
			continue
		}
		v, err := repl.ReplaceOrErr(*f, true, true)
		if err != nil {
			return fmt.Errorf("mcpi: authorization_server sign_in %s: %v (set the environment variable, or write the value)", name, err)
		}
		*f = v
	}
	as := *cfg.AuthorizationServer
	as.SignIn = &si
	cfg.AuthorizationServer = &as
	return nil
}
