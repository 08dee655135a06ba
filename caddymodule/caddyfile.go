package caddymodule

import (
	"slices"
	"strconv"

	"github.com/mcpi-edge/caddy-mcpi/edge"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
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
// Each subdirective may appear once, but for those in repeatable; `trust`
// has no default and Validate refuses a config without it.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	// The subdirectives of each concern are parsed beside its code; a hook
	// answers handled for a name it knows.
	hooks := []func(*caddyfile.Dispenser, string) (handled bool, err error){
		h.unmarshalLevel2, h.unmarshalLevel3, h.unmarshalPolicy, h.unmarshalRateLimit,
		h.unmarshalObservability, h.unmarshalProofs, h.unmarshalDelegation, h.unmarshalFrontDoor,
	}
	return eachSetting(d, "", repeatable, func(name string) error {
		for _, hook := range hooks {
			if handled, err := hook(d, name); handled || err != nil {
				return err
			}
		}
		return h.unmarshalCore(d, name)
	})
}

// repeatable are the subdirectives that may be given more than once; their
// duplicates are refused elsewhere: a tool once per name or glob, a rule
// name once per route (Validate), a rate limit once per key and rate, a
// JSON-LD context once per URL, trust once as a list of issuers and once
// as authorization_server.
var repeatable = []string{"tool", "rule", "rate_limit", "jsonld_context", "trust"}

// unmarshalCore parses the subdirectives of Level 1 verification.
func (h *Handler) unmarshalCore(d *caddyfile.Dispenser, name string) error {
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
		return h.unmarshalTrust(d)
	case "audience":
		return argList(d, &h.Audiences)
	case "require_audience":
		return flag(d, &h.RequireAudience)
	case "require_presentation":
		return flag(d, &h.RequirePresentation)
	case "require_scopes":
		return argList(d, &h.RequiredScopes)
	case "carriers":
		return h.unmarshalCarriers(d)
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
		return parseDuration(d, &h.ClockSkew)
	case "did_cache_ttl":
		return parseDuration(d, &h.DIDCacheTTL)
	case "did_web_timeout":
		return parseDuration(d, &h.DIDWebTimeout)
	case "max_credential_size":
		return parseSize(d, &h.MaxCredentialSize)
	case "max_body_size":
		return parseSize(d, &h.MaxBodySize)
	case "allow_private_did_web":
		return flag(d, &h.AllowPrivateDIDWeb)
	case "authorization_servers":
		return argList(d, &h.AuthorizationServers)
	case "max_credential_lifetime":
		return parseDuration(d, &h.MaxCredentialLifetime)
	case "allow_endless_credentials":
		return flag(d, &h.AllowEndlessCredentials)
	case "passthrough_credential":
		return flag(d, &h.PassthroughCredential)
	case "verification_cache":
		var v string
		if !d.AllArgs(&v) {
			return d.ArgErr()
		}
		if v == "off" {
			h.VerificationCacheSize = -1
			break
		}
		var err error
		h.VerificationCacheSize, err = positiveInt(d, v, "verification_cache must be a positive number of entries or off")
		return err
	default:
		return d.Errf("unrecognized mcpi subdirective %q", name)
	}
	return nil
}

// unmarshalTrust parses `trust any | <did>...` (trust authorization_server
// is the front door's, unmarshalFrontDoor).
func (h *Handler) unmarshalTrust(d *caddyfile.Dispenser) error {
	if h.TrustedIssuers != nil {
		return d.Err("trust already specified")
	}
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	if slices.Contains(args, trustAuthorizationServer) {
		return d.Errf("trust %s goes on its own line", trustAuthorizationServer)
	}
	if len(args) == 1 && (args[0] == "any" || args[0] == edge.AnyIssuer) {
		h.TrustedIssuers = []string{edge.AnyIssuer}
		return nil
	}
	for _, a := range args {
		if a == "any" || a == edge.AnyIssuer {
			return d.Errf("trust any must stand alone")
		}
	}
	h.TrustedIssuers = args
	return nil
}

// unmarshalCarriers parses `carriers <name>...`: known carriers, each once.
func (h *Handler) unmarshalCarriers(d *caddyfile.Dispenser) error {
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
	return nil
}
