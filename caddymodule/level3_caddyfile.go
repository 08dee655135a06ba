package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// unmarshalLevel3 parses a Level 3 subdirective of the mcpi block;
// handled is false for a name it does not know. Syntax:
//
//	handshake terminate
//	handshake proxy [<handshake_endpoint> [<verify_endpoint>]]
//	handshake_paths <handshake_path> <verify_path>
//	handshake_methods <handshake_method> <verify_method>
//	upstream_did <did>
//	nonce_store memory [<max_entries>]
//	nonce_store redis <url>
//	nonce_store redis {
//		address <host:port>
//		password <password>
//		db <n>
//		tls
//		key_prefix <prefix>
//		...
//	}
//	challenge_ttl <duration>
//	handshake_skew <duration>
//	session_ttl <duration>
//	discovery_ttl <duration>
//	legacy_handshake pass|verify
//
// Each may appear once. Endpoints are paths on the route's upstream or
// absolute URLs. Discovery fetches the upstream's /.well-known/mcp-i.json
// from the Level 2 `upstream <origin>` when it is set.
func (h *Handler) unmarshalLevel3(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	c := &h.Level3Config
	switch name {
	case "handshake":
		err = unmarshalHandshake(d, c)
	case "handshake_paths":
		err = args(d, &c.HandshakePath, &c.VerifyPath)
	case "handshake_methods":
		err = args(d, &c.HandshakeMethod, &c.VerifyMethod)
	case "upstream_did":
		err = args(d, &c.UpstreamDID)
	case "nonce_store":
		if !d.NextArg() {
			return true, d.ArgErr()
		}
		backend := d.Val()
		unm, err := caddyfile.UnmarshalModule(d, "mcpi.nonce_stores."+backend)
		if err != nil {
			return true, err
		}
		h.NonceStoreRaw = caddyconfig.JSONModuleObject(unm, "backend", backend, nil)
	case "challenge_ttl":
		err = parseDuration(d, &c.ChallengeTTL)
	case "handshake_skew":
		err = parseDuration(d, &c.HandshakeSkew)
	case "session_ttl":
		err = parseDuration(d, &c.SessionTTL)
	case "discovery_ttl":
		err = parseDuration(d, &c.DiscoveryTTL)
	case "legacy_handshake":
		err = oneOf(d, name, &c.LegacyHandshake, edge.LegacyPass, edge.LegacyVerify)
	default:
		return false, nil
	}
	return true, err
}

// unmarshalHandshake parses `handshake terminate` or
// `handshake proxy [<handshake_endpoint> [<verify_endpoint>]]`.
func unmarshalHandshake(d *caddyfile.Dispenser, c *Level3Config) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	switch args[0] {
	case edge.HandshakeTerminate:
		if len(args) != 1 {
			return d.ArgErr()
		}
	case edge.HandshakeProxy:
		if len(args) > 3 {
			return d.ArgErr()
		}
		for i, a := range args[1:] {
			if err := edge.ValidEndpoint(a); err != nil {
				return d.Errf("handshake proxy: endpoint %q: %v", a, err)
			}
			if i == 0 {
				c.HandshakeEndpoint = a
			} else {
				c.VerifyEndpoint = a
			}
		}
	default:
		return d.Errf("handshake must be terminate or proxy, got %q", args[0])
	}
	c.Handshake = args[0]
	return nil
}
