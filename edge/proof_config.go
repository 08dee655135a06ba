package edge

import (
	"errors"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/edge/proofstep"
)

// ProofConfig holds the KYA-OS extension settings (org.kya-os/
// decentralized-authority, docs/kyaos.md). It is embedded in Config, so its
// fields are top-level JSON config fields of http.handlers.mcpi.
type ProofConfig struct {
	// Per-request holder-of-key proofs in params._meta: "off" (not read),
	// "optional" (a proof present is verified and must be valid) or
	// "required" (no valid proof, no entry). The proof's audience is the
	// route's DID (upstream_did when set, else edge_did, else
	// did:web:<host>) and its did the credential's subject. Default:
	// optional.
	RequestProof string `json:"request_proof,omitempty"`

	// Refuse clients that do not declare the extension in their
	// capabilities (-32021; a malformed declaration -32602), except on
	// server/discover and ping, and declare it in the server/discover
	// results passed back.
	RequireExtension bool `json:"require_extension,omitempty"`

	// Sign JSON-RPC results with the edge's key under the edge DID,
	// published in its did.json: "off", "sign" (body profile for content alone, else envelope) or "sign
	// envelope" (the whole result minus _meta). Needs level 2 or 3 (the
	// edge's key and did.json). Default: off.
	ResponseProof string `json:"response_proof,omitempty"`
}

// validateProofs runs from Validate.
func (cfg *Config) validateProofs() error {
	c := proof.Config{RequestProof: cfg.RequestProof, ResponseProof: cfg.ResponseProof}
	if err := c.Validate(); err != nil {
		return err
	}
	if c.ResponseProof != "" && c.ResponseProof != proof.Off && cfg.Level < 2 {
		return errResponseProofLevel
	}
	return nil
}

var errResponseProofLevel = errors.New("mcpi: response_proof needs `level 2` or 3 (the edge's signing key and did.json)")

// provisionProofs builds the proof step (edge/proofstep); the nonce store
// is the route's.
func (h *Handler) provisionProofs() {
	gate := proof.New(proof.Config{
		RequestProof:     h.cfg.RequestProof,
		RequireExtension: h.cfg.RequireExtension,
		ResponseProof:    h.cfg.ResponseProof,
	}, observe.TraceResolver(h.didCache), h.nonces)
	// 2025-11-25 clients declare once, in initialize: their sessions'
	// declarations are kept where the store keeps bindings (shared by
	// replicas with Redis). A store without bindings: they must declare
	// per request.
	if b, err := h.sessionBinder(); err == nil {
		gate.WithSessions(b)
	}
	parts := proofstep.Parts{Site: h.site, Identity: h.ident, Logger: h.logger}
	// A signed consent challenge needs somewhere to send the user:
	// consent_url, else the edge's own consent page.
	if h.cfg.ConsentURL != "" || h.consent.Own() {
		parts.Consent = h.consent.URL
	}
	h.proofs = proofstep.New(gate, proofstep.Route{
		EdgeDID: h.cfg.EdgeDID, UpstreamDID: h.cfg.UpstreamDID, Audiences: h.cfg.Audiences, MaxBody: h.cfg.MaxBodySize,
	}, parts)
}
