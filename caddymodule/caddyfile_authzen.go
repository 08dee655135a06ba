package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/authzen"
)

// unmarshalAuthZEN parses the authzen subdirective (docs/config/rules.md):
//
//	authzen <url> {
//		timeout <duration>      # default 1s
//		cache_ttl <duration>    # default: no cache
//		cache_size <n>          # default 1024
//		allow_private           # the PDP is on loopback or a private network
//		message <text>          # a refusal without the PDP's reason
//		bearer <token>          # Authorization: Bearer <token> on every request
//		header <name> <value>   # or a header of the PDP's own (an API key)
//	}
//
// The credential may be a global placeholder ({env.PDP_TOKEN}), replaced
// at provision (resolveAuthZEN).
func (h *Handler) unmarshalAuthZEN(d *caddyfile.Dispenser) error {
	c := new(authzen.Config)
	if !d.AllArgs(&c.URL) {
		return d.Err("authzen takes the URL of the PDP's evaluation endpoint, such as https://pdp.example.com/access/v1/evaluation")
	}
	err := eachSetting(d, "authzen: ", nil, func(sub string) error {
		switch sub {
		case "timeout":
			return parseDuration(d, &c.Timeout)
		case "cache_ttl":
			return parseDuration(d, &c.CacheTTL)
		case "cache_size":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			var err error
			c.CacheSize, err = positiveInt(d, v, "authzen: cache_size must be a positive number")
			return err
		case "allow_private":
			return flag(d, &c.AllowPrivate)
		case "message":
			return args(d, &c.Message)
		case "bearer":
			if !d.AllArgs(&c.Bearer) {
				return d.Err("authzen: bearer takes the token, such as {env.PDP_TOKEN}")
			}
			return nil
		case "header":
			c.Header = new(authzen.Header)
			if !d.AllArgs(&c.Header.Name, &c.Header.Value) {
				return d.Err("authzen: header takes a name and a value, such as X-Api-Key {env.PDP_KEY}")
			}
			return nil
		}
		return d.Errf("authzen: unrecognized setting %q", sub)
	})
	if err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return d.Err(err.Error())
	}
	h.AuthZEN = c
	return nil
}

// resolveAuthZEN replaces the global placeholders ({env.*}) of the PDP's
// credential, in a copy: the configuration keeps the placeholder, and the
// secret is in the edge's client alone. An unset or empty one is an error
// naming the setting, never an empty credential.
func resolveAuthZEN(cfg *edge.Config) error {
	if cfg.AuthZEN == nil || (cfg.AuthZEN.Bearer == "" && cfg.AuthZEN.Header == nil) {
		return nil
	}
	c := *cfg.AuthZEN
	repl := caddy.NewReplacer()
	resolve := func(name string, f *string) error {
		v, err := repl.ReplaceOrErr(*f, true, true)
		if err != nil {
			return fmt.Errorf("mcpi: authzen %s: %v (set the environment variable, or write the value)", name, err)
		}
		*f = v
		return nil
	}
	if c.Bearer != "" {
		if err := resolve("bearer", &c.Bearer); err != nil {
			return err
		}
	}
	if c.Header != nil {
		hd := *c.Header
		if err := resolve("header "+hd.Name, &hd.Value); err != nil {
			return err
		}
		c.Header = &hd
	}
	cfg.AuthZEN = &c
	return nil
}
