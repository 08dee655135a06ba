package edge

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
)

// The edge's own /.well-known/mcp-i.json and its did:web service entries;
// discovery of the upstream's endpoints is handshake.Discovery.

const wellKnownMCPI = handshake.WellKnownPath

// edgePathPrefix is the part of the original request path that earlier
// handlers (handle_path, uri strip_prefix) removed, so that the endpoints
// the edge advertises are the ones clients must use.
func (h *Handler) edgePathPrefix(r *http.Request) string {
	_, orig := h.original(r)
	if orig == nil || r.URL == nil {
		return ""
	}
	op, cp := orig.Path, r.URL.Path
	if len(op) > len(cp) && strings.HasSuffix(op, cp) {
		return strings.TrimSuffix(op[:len(op)-len(cp)], "/")
	}
	return ""
}

// serveMCPIDocument answers /.well-known/mcp-i.json. The endpoints are the
// edge's handshake paths in both modes: when terminating they are the
// edge's own; when proxying they are the upstream's endpoints as reached
// through the edge, which forwards them (so that the agent never bypasses
// the edge's checks). The methods are those the edge verifies.
func (h *Handler) serveMCPIDocument(w http.ResponseWriter, r *http.Request) {
	prefix := h.edgePathPrefix(r)
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
	base := h.requestScheme(r) + "://" + h.serviceHost(r) + h.edgePathPrefix(r)
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
