package edge

import (
	"encoding/json"
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
)

// The edge's own /.well-known/mcp-i.json and its did:web service entries;
// discovery of the upstream's endpoints is handshake.Discovery.

const wellKnownMCPI = handshake.WellKnownPath

// serveMCPIDocument answers /.well-known/mcp-i.json. The endpoints are the
// edge's handshake paths in both modes: when terminating they are the
// edge's own; when proxying they are the upstream's endpoints as reached
// through the edge, which forwards them (so that the agent never bypasses
// the edge's checks). The methods are those the edge verifies.
func (h *Handler) serveMCPIDocument(w http.ResponseWriter, r *http.Request) {
	prefix := h.site.PathPrefix(r)
	var doc handshake.Document
	doc.MCPI.Version = handshake.DocumentVersion
	doc.MCPI.Endpoints = map[string]string{
		"handshake": prefix + h.l3.hsPath,
		"verify":    prefix + h.l3.vfPath,
	}
	doc.MCPI.SupportedMethods = h.l3.service.SupportedMethods()
	body, _ := json.Marshal(doc)
	writeJSON(w, http.StatusOK, body, "public, max-age=300")
}

// handshakeServices returns the service entries that announce the edge's
// handshake in its did:web document (Level 2 serves did.json): one service
// "<edgeDID>#mcp-i" of type mcp-i whose endpoint maps handshake and verify
// to their absolute URLs on the host r was sent to. Nil below level 3.
func (h *Handler) handshakeServices(r *http.Request, edgeDID string) []assertion.Service {
	if !h.l3.enabled {
		return nil
	}
	base := h.site.Scheme(r) + "://" + h.site.Host(r) + h.site.PathPrefix(r)
	return []assertion.Service{{
		ID:   edgeDID + "#mcp-i",
		Type: "mcp-i",
		ServiceEndpoint: map[string]string{
			"handshake": base + h.l3.hsPath,
			"verify":    base + h.l3.vfPath,
		},
	}}
}

// ValidEndpoint checks a handshake_endpoint or verify_endpoint setting: a
// path, or an absolute http(s) URL.
func ValidEndpoint(s string) error {
	_, err := handshake.ParseEndpoint(s)
	return err
}
