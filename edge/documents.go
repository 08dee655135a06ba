package edge

import (
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/edge/wellknown"
)

// provisionDocuments fills in the documents the edge serves, once the
// parts they describe are built.
func (h *Handler) provisionDocuments() {
	d := h.docs
	d.Resource = wellknown.Resource{Level: h.cfg.Level, AuthorizationServers: h.cfg.AuthorizationServers}
	if h.front != nil {
		d.Resource.FrontDoorScopes = h.front.ScopesSupported
	}
	if h.proofs.Enforces() {
		d.MCP = &wellknown.MCP{
			EdgeDID:           h.cfg.EdgeDID,
			Audience:          h.proofs.audience,
			Proof:             h.proofs.Enabled(),
			ResponseProof:     h.proofs.SignsResponses(),
			RequiresExtension: h.proofs.RequiresExtension(),
			Skew:              h.proofs.Skew(),
		}
	}
	d.Identity = h.ident
	if h.l3 != nil {
		d.Handshake = h.l3.Document()
	}
}

// audience is the DID a request proof must name: upstream_did, else
// edge_did, else did:web of the Host.
func (p *proofStep) audience(r *http.Request) string {
	if p.cfg.UpstreamDID != "" {
		return p.cfg.UpstreamDID
	}
	if p.cfg.EdgeDID != "" {
		return p.cfg.EdgeDID
	}
	return p.hostDID.of(p.site.Host(r))
}
