package edge

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/mcp/extension"
)

// wellKnownMCP is the KYA-OS server document (docs/protocol/kyaos.md#the-server-document): how a client
// learns, before its first call, what the route requires.
const wellKnownMCP = "/.well-known/mcp"

// mcpDocument is the edge's /.well-known/mcp. The source's fields, as far as
// the edge has them: no handshake or status-list endpoints (the 2026
// extension has neither; Level 3's handshake is announced in did.json), and
// the extension's settings as server/discover declares them. Audience is
// ours: the DID a request proof must name (docs/protocol/kyaos.md#audience), which is not the edge's
// own when upstream_did is set.
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

// serveWellKnownMCP answers GET and HEAD /.well-known/mcp when the edge
// enforces the extension (request_proof required, require_extension, or
// response_proof sign), without a credential: it is how a client learns
// what to present. Under the default (optional proofs, nothing signed)
// the path is the upstream's.
func (h *Handler) serveWellKnownMCP(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != wellKnownMCP || (r.Method != http.MethodGet && r.Method != http.MethodHead) || !h.proofs.Enforces() {
		return false
	}
	aud, err := h.proofAudience(r)
	if err != nil {
		_ = h.reject(w, r, err, nil)
		return true
	}
	body, _ := json.Marshal(mcpDocument{
		DID:      h.edgeDIDFor(r),
		Version:  "1.0.0",
		Audience: aud,
		Capabilities: mcpDocumentCaps{
			Delegation:    true,
			Proof:         h.proofs.Enabled(),
			ResponseProof: h.proofs.SignsResponses(),
		},
		SupportedDIDMethods: []string{"did:key", "did:web"},
		ProofAlgorithms:     []string{"EdDSA", "ES256"},
		ClockSkewSeconds:    clockSkewSeconds(h.proofs.Skew()),
		Extensions:          map[string]map[string]any{extension.ID: extension.ServerSettings(h.proofs.RequiresExtension())},
	})
	if h.EdgeDID == "" { // the DID and the audience are the Host's
		varyHost(w)
	}
	writeJSON(w, http.StatusOK, body, "public, max-age=300")
	return true
}

// clockSkewSeconds is the skew as KYA-OS bounds the field (30 to
// 600): a client uses it to check the edge's timestamps, and the edge's are
// fresh, so the lower bound costs nothing.
func clockSkewSeconds(d time.Duration) int {
	return min(max(int(d/time.Second), 30), 600)
}

// edgeDIDFor is the edge's DID for r: edge_did, else did:web of the Host,
// as the Level 2 identity (edge/identity) derives it.
func (h *Handler) edgeDIDFor(r *http.Request) string {
	if h.EdgeDID != "" {
		return h.EdgeDID
	}
	return requestAudiences(h.serviceHost(r))[0]
}
