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
		return true, oneOf(d, name, &c.RequestProof, proof.Off, proof.Optional, proof.Required)
	case "require_extension":
		return true, flag(d, &c.RequireExtension)
	case "response_proof":
		// Its value may be two words ("sign envelope").
		v := strings.Join(d.RemainingArgs(), " ")
		if err := oneOfValues(d, name, v, proof.Off, proof.SignBody, proof.SignEnvelope); err != nil {
			return true, err
		}
		c.ResponseProof = v
	default:
		return false, nil
	}
	return true, nil
}
