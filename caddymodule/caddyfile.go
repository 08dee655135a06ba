package caddymodule

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

// parseCaddyfile sets up the handler from Caddyfile tokens.
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	mcpi {
//		level 1
//		trust any | <did>...
//		audience <id>...
//		require_audience
//		require_presentation
//		require_scopes <scope>...
//		carriers <name>...
//		non_delegation_bearer pass|reject
//		clock_skew <duration>
//		max_credential_size <size>
//		max_body_size <size>
//		did_cache_ttl <duration>
//		did_web_timeout <duration>
//		allow_private_did_web
//		authorization_servers <url>...
//		passthrough_credential
//		verification_cache <entries>|off
//		status_list_ttl <duration>
//		status_stale_if_error <duration>
//		jsonld on|off
//		jsonld_context <url> <file>
//		chain_fetch off | [on | <url-prefix>...] [{ allow, timeout, max_size, cache_ttl }]
//	}
//
// Each subdirective may appear once (jsonld_context once per URL); `trust`
// has no default and Validate refuses a config without it.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := make(map[string]bool)
	for d.NextBlock(0) {
		name := d.Val()
		// Level 2 and 3 subdirectives are parsed beside their code; each
		// hook checks its own duplicates (some may repeat, like per-DID
		// reputation scores).
		if handled, err := h.unmarshalLevel2(d, name); handled || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if handled, err := h.unmarshalLevel3(d, name); handled || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if handled, err := h.unmarshalPolicy(d, name); handled || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if handled, err := h.unmarshalRateLimit(d, name); handled || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if handled, err := h.unmarshalObservability(d, name); handled || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if handled, err := h.unmarshalProofs(d, name); handled || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if handled, err := h.unmarshalDelegation(d, name); handled || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if handled, err := h.unmarshalFrontDoor(d, name); handled || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if seen[name] {
			return d.Errf("%s already specified", name)
		}
		seen[name] = true

		switch name {
		case "level":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 3 {
				return d.Errf("level must be 1, 2 or 3, got %q", v)
			}
			h.Level = n

		case "trust":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			if slices.Contains(args, trustAuthorizationServer) {
				return d.Errf("trust %s goes on its own line", trustAuthorizationServer)
			}
			if len(args) == 1 && (args[0] == "any" || args[0] == edge.AnyIssuer) {
				h.TrustedIssuers = []string{edge.AnyIssuer}
				break
			}
			for _, a := range args {
				if a == "any" || a == edge.AnyIssuer {
					return d.Errf("trust any must stand alone")
				}
			}
			h.TrustedIssuers = args

		case "audience":
			if h.Audiences = d.RemainingArgs(); len(h.Audiences) == 0 {
				return d.ArgErr()
			}

		case "require_audience":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.RequireAudience = true

		case "require_presentation":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.RequirePresentation = true

		case "require_scopes":
			if h.RequiredScopes = d.RemainingArgs(); len(h.RequiredScopes) == 0 {
				return d.ArgErr()
			}

		case "carriers":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			dup := make(map[string]bool, len(args))
			for _, a := range args {
				if !edge.IsCarrier(a) {
					return d.Errf("unknown carrier %q", a)
				}
				if dup[a] {
					return d.Errf("carrier %q listed twice", a)
				}
				dup[a] = true
			}
			h.Carriers = args

		case "non_delegation_bearer":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			if v != edge.BearerPass && v != edge.BearerReject {
				return d.Errf("non_delegation_bearer must be pass or reject, got %q", v)
			}
			h.NonDelegationBearer = v

		case "clock_skew":
			if err := parseDuration(d, &h.ClockSkew); err != nil {
				return err
			}
		case "did_cache_ttl":
			if err := parseDuration(d, &h.DIDCacheTTL); err != nil {
				return err
			}
		case "did_web_timeout":
			if err := parseDuration(d, &h.DIDWebTimeout); err != nil {
				return err
			}

		case "max_credential_size":
			if err := parseSize(d, &h.MaxCredentialSize); err != nil {
				return err
			}
		case "max_body_size":
			if err := parseSize(d, &h.MaxBodySize); err != nil {
				return err
			}

		case "allow_private_did_web":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.AllowPrivateDIDWeb = true

		case "authorization_servers":
			if h.AuthorizationServers = d.RemainingArgs(); len(h.AuthorizationServers) == 0 {
				return d.ArgErr()
			}

		case "max_credential_lifetime":
			if err := parseDuration(d, &h.MaxCredentialLifetime); err != nil {
				return err
			}
		case "allow_endless_credentials":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.AllowEndlessCredentials = true

		case "passthrough_credential":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.PassthroughCredential = true

		case "verification_cache":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			if v == "off" {
				h.VerificationCacheSize = -1
				break
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return d.Errf("verification_cache must be a positive number of entries or off, got %q", v)
			}
			h.VerificationCacheSize = n

		default:
			return d.Errf("unrecognized mcpi subdirective %q", name)
		}
	}
	return nil
}

// parseDuration reads one duration argument (caddy.ParseDuration: Go
// durations plus "d" for days).
func parseDuration(d *caddyfile.Dispenser, dst *edge.Duration) error {
	name := d.Val()
	var v string
	if !d.AllArgs(&v) {
		return d.ArgErr()
	}
	dur, err := caddy.ParseDuration(v)
	if err != nil {
		return d.Errf("%s: invalid duration %q: %v", name, v, err)
	}
	if dur <= 0 {
		return d.Errf("%s: duration must be positive, got %q", name, v)
	}
	*dst = edge.Duration(dur)
	return nil
}

// parseSize reads one size argument, in bytes or with a unit (64KiB, 1MB).
func parseSize(d *caddyfile.Dispenser, dst *int64) error {
	name := d.Val()
	var v string
	if !d.AllArgs(&v) {
		return d.ArgErr()
	}
	n, err := humanize.ParseBytes(v)
	if err != nil {
		return d.Errf("%s: invalid size %q: %v", name, v, err)
	}
	if n == 0 || n > math.MaxInt32 {
		return d.Errf("%s: size must be between 1 byte and 2GiB, got %q", name, v)
	}
	*dst = int64(n)
	return nil
}

// onlyOnce refuses subdirective name given a second time (set: it was
// given before).
func onlyOnce(d *caddyfile.Dispenser, name string, set bool) error {
	if set {
		return d.Errf("%s already specified", name)
	}
	return nil
}

// oneOf reads the one argument of subdirective name into dst, which must be
// one of allowed; name may be given once.
func oneOf(d *caddyfile.Dispenser, name string, dst *string, allowed ...string) error {
	if err := onlyOnce(d, name, *dst != ""); err != nil {
		return err
	}
	var v string
	if !d.AllArgs(&v) {
		return d.ArgErr()
	}
	if err := oneOfValues(d, name, v, allowed...); err != nil {
		return err
	}
	*dst = v
	return nil
}

// oneOfValues refuses a value of subdirective name that is not one of
// allowed, naming them.
func oneOfValues(d *caddyfile.Dispenser, name, v string, allowed ...string) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	want := strings.Join(allowed[:len(allowed)-1], ", ") + " or " + allowed[len(allowed)-1]
	return d.Errf("%s must be %s, got %q", name, want, v)
}
