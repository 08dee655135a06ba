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
	dup := func(set bool) error {
		if set {
			return d.Errf("%s already specified", name)
		}
		return nil
	}
	switch name {
	case "handshake":
		if err := dup(c.Handshake != ""); err != nil {
			return true, err
		}
		args := d.RemainingArgs()
		if len(args) == 0 {
			return true, d.ArgErr()
		}
		switch args[0] {
		case edge.HandshakeTerminate:
			if len(args) != 1 {
				return true, d.ArgErr()
			}
		case edge.HandshakeProxy:
			if len(args) > 3 {
				return true, d.ArgErr()
			}
			for i, a := range args[1:] {
				if err := edge.ValidEndpoint(a); err != nil {
					return true, d.Errf("handshake proxy: endpoint %q: %v", a, err)
				}
				if i == 0 {
					c.HandshakeEndpoint = a
				} else {
					c.VerifyEndpoint = a
				}
			}
		default:
			return true, d.Errf("handshake must be terminate or proxy, got %q", args[0])
		}
		c.Handshake = args[0]

	case "handshake_paths":
		if err := dup(c.HandshakePath != "" || c.VerifyPath != ""); err != nil {
			return true, err
		}
		var hs, vf string
		if !d.AllArgs(&hs, &vf) {
			return true, d.ArgErr()
		}
		c.HandshakePath, c.VerifyPath = hs, vf

	case "handshake_methods":
		if err := dup(c.HandshakeMethod != "" || c.VerifyMethod != ""); err != nil {
			return true, err
		}
		var hm, vm string
		if !d.AllArgs(&hm, &vm) {
			return true, d.ArgErr()
		}
		c.HandshakeMethod, c.VerifyMethod = hm, vm

	case "upstream_did":
		if err := dup(c.UpstreamDID != ""); err != nil {
			return true, err
		}
		if !d.AllArgs(&c.UpstreamDID) {
			return true, d.ArgErr()
		}

	case "nonce_store":
		if err := dup(h.NonceStoreRaw != nil); err != nil {
			return true, err
		}
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
		if err := dup(c.ChallengeTTL != 0); err != nil {
			return true, err
		}
		return true, parseDuration(d, &c.ChallengeTTL)
	case "handshake_skew":
		if err := dup(c.HandshakeSkew != 0); err != nil {
			return true, err
		}
		return true, parseDuration(d, &c.HandshakeSkew)
	case "session_ttl":
		if err := dup(c.SessionTTL != 0); err != nil {
			return true, err
		}
		return true, parseDuration(d, &c.SessionTTL)
	case "discovery_ttl":
		if err := dup(c.DiscoveryTTL != 0); err != nil {
			return true, err
		}
		return true, parseDuration(d, &c.DiscoveryTTL)

	case "legacy_handshake":
		return true, oneOf(d, name, &c.LegacyHandshake, edge.LegacyPass, edge.LegacyVerify)

	default:
		return false, nil
	}
	return true, nil
}
