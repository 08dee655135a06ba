package wellknown

import (
	"encoding/json"
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/edge/internal/reply"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
)

// WellKnownMCPI is the path of the MCP-I handshake document.
const WellKnownMCPI = handshake.WellKnownPath

// Handshake is the Level 3 handshake document and the service entry that
// announces the handshake in the edge's did.json. The endpoints are the
// edge's handshake paths in both modes: when terminating they are the
// edge's own; when proxying they are the upstream's endpoints as reached
// through the edge, which forwards them (so that the agent never bypasses
// the edge's checks).
type Handshake struct {
	// HandshakePath and VerifyPath are the edge's handshake paths.
	HandshakePath, VerifyPath string
	// Methods are the DID methods the edge verifies.
	Methods []string
}

func (hs *Handshake) serve(w http.ResponseWriter, r *http.Request, s *site.Site) {
	prefix := s.PathPrefix(r)
	var doc handshake.Document
	doc.MCPI.Version = handshake.DocumentVersion
	doc.MCPI.Endpoints = map[string]string{
		"handshake": prefix + hs.HandshakePath,
		"verify":    prefix + hs.VerifyPath,
	}
	doc.MCPI.SupportedMethods = hs.Methods
	body, _ := json.Marshal(doc)
	reply.JSON(w, http.StatusOK, body, "public, max-age=300")
}

// Services returns the service entries that announce the handshake in
// the edge's did:web document: one service "<edgeDID>#mcp-i" of type mcp-i
// whose endpoint maps handshake and verify to their absolute URLs on the
// host r was sent to.
func (hs *Handshake) Services(r *http.Request, s *site.Site, edgeDID string) []assertion.Service {
	base := s.Origin(r) + s.PathPrefix(r)
	return []assertion.Service{{
		ID:   edgeDID + "#mcp-i",
		Type: "mcp-i",
		ServiceEndpoint: map[string]string{
			"handshake": base + hs.HandshakePath,
			"verify":    base + hs.VerifyPath,
		},
	}}
}
