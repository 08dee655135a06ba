package edge

import "github.com/mcpi-edge/caddy-mcpi/edge/wellknown"

// provisionDocuments fills in the documents the edge serves, once the
// parts they describe are built.
func (h *Handler) provisionDocuments() {
	d := h.docs
	d.Resource = wellknown.Resource{Level: h.cfg.Level, AuthorizationServers: h.cfg.AuthorizationServers}
	if h.front != nil {
		d.Resource.FrontDoorScopes = h.front.ScopesSupported
	}
	if gate := h.proofs.Gate(); gate.Enforces() {
		d.MCP = &wellknown.MCP{
			EdgeDID:           h.cfg.EdgeDID,
			Audience:          h.proofs.Audience,
			Proof:             gate.Enabled(),
			ResponseProof:     gate.SignsResponses(),
			RequiresExtension: gate.RequiresExtension(),
			Skew:              gate.Skew(),
		}
	}
	d.Identity = h.ident
	if h.l3 != nil {
		d.Handshake = h.l3.Document()
	}
}
