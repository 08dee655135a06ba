package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

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
//	}
func (h *Handler) unmarshalAuthZEN(d *caddyfile.Dispenser) error {
	if h.AuthZEN != nil {
		return d.Err("authzen already specified")
	}
	c := new(authzen.Config)
	if !d.AllArgs(&c.URL) {
		return d.Err("authzen takes the URL of the PDP's evaluation endpoint, such as https://pdp.example.com/access/v1/evaluation")
	}
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if seen[sub] {
			return d.Errf("authzen: %s already specified", sub)
		}
		seen[sub] = true
		switch sub {
		case "timeout":
			if err := parseDuration(d, &c.Timeout); err != nil {
				return err
			}
		case "cache_ttl":
			if err := parseDuration(d, &c.CacheTTL); err != nil {
				return err
			}
		case "cache_size":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("authzen: cache_size must be a positive number, got %q", v)
			}
			c.CacheSize = n
		case "allow_private":
			if d.NextArg() {
				return d.ArgErr()
			}
			c.AllowPrivate = true
		case "message":
			if !d.AllArgs(&c.Message) {
				return d.ArgErr()
			}
		default:
			return d.Errf("authzen: unrecognized setting %q", sub)
		}
	}
	if err := c.Validate(); err != nil {
		return d.Err(err.Error())
	}
	h.AuthZEN = c
	return nil
}
