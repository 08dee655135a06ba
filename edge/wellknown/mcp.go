package wellknown

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/internal/reply"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/mcp/extension"
)

// WellKnownMCP is the path of the KYA-OS server document: how a client
// learns, before its first call, what the route requires.
const WellKnownMCP = "/.well-known/mcp"

// MCP is the KYA-OS server document. The edge serves it only where it
// enforces the extension (request proofs required, the extension required,
// or responses signed); under the default the path is the upstream's.
type MCP struct {
	// EdgeDID is edge_did; "" when the DID is the Host's did:web.
	EdgeDID string
	// Audience is the DID a request proof must name for r, which is not
	// the edge's own when upstream_did is set.
	Audience func(r *http.Request) string
	// Proof and ResponseProof: request proofs are read, responses signed.
	Proof, ResponseProof bool
	// RequiresExtension: the client must declare the extension.
	RequiresExtension bool
	// Skew is the tolerance on the proofs' timestamps.
	Skew time.Duration
}

// mcpDocument is the edge's /.well-known/mcp: the source's fields, as far
// as the edge has them (no handshake or status-list endpoints: the 2026
// extension has neither, and Level 3's handshake is announced in
// did.json), and the extension's settings as server/discover declares
// them. Audience is the edge's own addition: the DID a request proof
// must name.
type mcpDocument struct {
	DID                 string                    `json:"did"`
	Version             string                    `json:"version"`
	Audience            string                    `json:"audience"`
	Capabilities        mcpDocumentCaps           `json:"capabilities"`
	SupportedDIDMethods []string                  `json:"supported_did_methods"`
	ProofAlgorithms     []string                  `json:"proof_algorithms"`
	ClockSkewSeconds    int                       `json:"clockSkewSeconds"`
	Extensions          map[string]map[string]any `json:"extensions"`
}

type mcpDocumentCaps struct {
	Delegation    bool `json:"delegation"`
	Proof         bool `json:"proof"`
	ResponseProof bool `json:"responseProof"`
}

func (m *MCP) serve(w http.ResponseWriter, r *http.Request, s *site.Site) {
	did := m.EdgeDID
	if did == "" {
		did = site.DIDWeb(s.Host(r))
	}
	body, _ := json.Marshal(mcpDocument{
		DID:      did,
		Version:  "1.0.0",
		Audience: m.Audience(r),
		Capabilities: mcpDocumentCaps{
			Delegation:    true,
			Proof:         m.Proof,
			ResponseProof: m.ResponseProof,
		},
		SupportedDIDMethods: []string{"did:key", "did:web"},
		ProofAlgorithms:     []string{"EdDSA", "ES256"},
		ClockSkewSeconds:    ClockSkewSeconds(m.Skew),
		Extensions:          map[string]map[string]any{extension.ID: extension.ServerSettings(m.RequiresExtension)},
	})
	if m.EdgeDID == "" { // the DID and the audience are the Host's
		reply.VaryHost(w)
	}
	reply.JSON(w, http.StatusOK, body, "public, max-age=300")
}

// ClockSkewSeconds is the skew as the server document bounds the field
// (30 to 600): a client uses it to check the edge's timestamps, and the
// edge's are fresh, so the lower bound costs nothing.
func ClockSkewSeconds(d time.Duration) int {
	return min(max(int(d/time.Second), 30), 600)
}
