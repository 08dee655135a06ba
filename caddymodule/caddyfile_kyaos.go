package caddymodule

import (
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
)

// unmarshalProofs parses a KYA-OS subdirective of the mcpi block; handled
// is false for a name it does not know. Syntax:
//
//	request_proof off|optional|required   # default optional
//	require_extension
//	response_proof off|sign [envelope]     # default off; needs level 2 or 3
//
// Each may appear once. The proof audience is upstream_did when set, else
// edge_did, else did:web:<host>.
func (h *Handler) unmarshalProofs(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	c := &h.ProofConfig
	switch name {
	case "request_proof":
		if c.RequestProof != "" {
			return true, d.Errf("%s already specified", name)
		}
		var v string
		if !d.AllArgs(&v) {
			return true, d.ArgErr()
		}
		switch v {
		case proof.Off, proof.Optional, proof.Required:
			c.RequestProof = v
		default:
			return true, d.Errf("request_proof must be off, optional or required, got %q", v)
		}
	case "require_extension":
		if c.RequireExtension {
			return true, d.Errf("%s already specified", name)
		}
		if d.NextArg() {
			return true, d.ArgErr()
		}
		c.RequireExtension = true
	case "response_proof":
		if c.ResponseProof != "" {
			return true, d.Errf("%s already specified", name)
		}
		args := d.RemainingArgs()
		v := strings.Join(args, " ")
		switch v {
		case proof.Off, proof.SignBody, proof.SignEnvelope:
			c.ResponseProof = v
		default:
			return true, d.Errf("response_proof must be off, sign or sign envelope, got %q", v)
		}
	default:
		return false, nil
	}
	return true, nil
}
