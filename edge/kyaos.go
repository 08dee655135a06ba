package edge

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
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
func (h *Handler) validateProofs() error {
	c := proof.Config{RequestProof: h.RequestProof, ResponseProof: h.ResponseProof}
	if err := c.Validate(); err != nil {
		return err
	}
	if c.ResponseProof != "" && c.ResponseProof != proof.Off && h.Level < 2 {
		return errResponseProofLevel
	}
	return nil
}

var errResponseProofLevel = errors.New("mcpi: response_proof needs `level 2` or 3 (the edge's signing key and did.json)")

// provisionProofs builds the gate; the nonce store is the route's.
func (h *Handler) provisionProofs() {
	h.proofs = proof.New(proof.Config{
		RequestProof:     h.RequestProof,
		RequireExtension: h.RequireExtension,
		ResponseProof:    h.ResponseProof,
	}, observe.TraceResolver(h.didCache), h.l3.store)
	// 2025-11-25 clients declare once, in initialize: their sessions'
	// declarations are kept where the store keeps bindings (shared by
	// replicas with Redis). A store without bindings: they must declare
	// per request.
	if b, err := h.proxySessionBinder(); err == nil {
		h.proofs.WithSessions(b)
	}
}

// proofBody returns the JSON-RPC body the gate reads: the one the carriers
// read, else read now (carriers in the body may be off). Where the gate
// reads proofs or declarations, the body of any method but the bodyless
// ones is read whatever its Content-Type: MCP requires a POST of
// application/json, but an upstream need not check either, and a
// proof-bearing body sent as text/plain or with PUT must not pass unread
// under optional.
func (h *Handler) proofBody(w http.ResponseWriter, r *http.Request, found *carrier.Found) ([]byte, error) {
	switch {
	case found.Body != nil:
		return found.Body, nil
	case h.proofs.Enabled() && !bodyless(r.Method) && hasRequestBody(r):
		// Any method that may carry a body, not only POST: an upstream
		// may take a PUT or a "post" for one.
	case h.proofs.SignsResponses() && carrier.WantsBody(r):
	default:
		return nil, nil
	}
	b, err := carrier.ReadBody(w, r, h.MaxBodySize)
	if err == nil {
		found.Body = b
	}
	return b, err
}

// negotiate applies the declaration gate; handled: the refusal is written.
func (h *Handler) negotiate(w http.ResponseWriter, r *http.Request, rb *rpcBody) bool {
	if !h.proofs.RequiresExtension() {
		return false
	}
	if rf := h.proofs.Negotiate(r.Context(), rb.forGate(), r.Header.Get("Mcp-Session-Id")); rf != nil {
		h.refuseProof(w, r, rb, rf)
		return true
	}
	return false
}

// admitProof checks the request proof of a request whose credential
// verified as d; handled: the refusal is written. d is nil for a request
// admitted without a credential (anonymous tools): its proof, by whichever
// agent, is checked all the same, only bound to no subject.
func (h *Handler) admitProof(w http.ResponseWriter, r *http.Request, rb *rpcBody, d *vc.Delegation) (verified, handled bool) {
	if !h.proofs.Inspects(rb.raw) {
		return false, false
	}
	aud, err := h.proofAudience(r)
	if err != nil {
		_ = h.reject(w, r, err, nil)
		return false, true
	}
	if !h.proofHostNamed(r) {
		aud = "" // matches no proof: audience_mismatch
	}
	agent, jkt := "", ""
	if d != nil {
		agent, jkt = d.AgentDID, d.CnfJKT
	}
	ok, rf := h.proofs.Admit(r.Context(), rb.forGate(), aud, agent, jkt)
	if rf != nil {
		h.refuseProof(w, r, rb, rf)
		return false, true
	}
	return ok, false
}

// proofAudience is the route's DID (docs/protocol/kyaos.md#audience).
func (h *Handler) proofAudience(r *http.Request) (string, error) {
	if h.UpstreamDID != "" {
		return h.UpstreamDID, nil
	}
	if h.EdgeDID != "" {
		return h.EdgeDID, nil
	}
	return h.proofHostDID.of(h.serviceHost(r)), nil
}

// proofHostNamed reports whether the proof audience may come from the
// request's Host. It may when edge_did or upstream_did fixes it, or when
// no audience is configured (the site is the edge's, as the operator
// wrote it). With audience configured and neither DID, the Host must be
// one those audiences name (its did:web, https:// origin or bare host):
// else a catch-all site would take a proof addressed to any server the
// client names in Host, and redeem it against a store that never saw it.
func (h *Handler) proofHostNamed(r *http.Request) bool {
	if h.UpstreamDID != "" || h.EdgeDID != "" || len(h.Audiences) == 0 {
		return true
	}
	for _, name := range requestAudiences(h.serviceHost(r)) {
		for _, a := range h.Audiences {
			if strings.EqualFold(a, name) {
				return true
			}
		}
	}
	return false
}

// hostDID remembers the did:web of the last Host a route's proofs were
// addressed under (a route is usually reached under one), so that the
// audience of a proof is not built again on every request.
type hostDID struct{ last lastDerived }

// of is requestAudiences(host)[0]: did:web of host.
func (m *hostDID) of(host string) string {
	return m.last.get(host, func(host string) string { return requestAudiences(host)[0] })
}

// refuseProof answers a refused proof or declaration (docs/protocol/kyaos.md#refusals):
// a JSON-RPC request gets a JSON-RPC error (code and data.reason);
// anything else {"error": reason}. The status is the refusal's.
func (h *Handler) refuseProof(w http.ResponseWriter, r *http.Request, rb *rpcBody, rf *proof.Refusal) {
	h.obs.Decision(r, observe.Decision{Outcome: "rejected", Reason: rf.Tag, Status: rf.Status})
	// A JSON-RPC error for a request, a batch or a body the edge could not
	// read (id null unless one request); {"error": reason} otherwise.
	var id json.RawMessage
	jsonRPC := false
	if rb.raw != nil {
		msgs, batch, err := rb.messages()
		switch {
		case err == nil && !batch && len(msgs) == 1 && mcp.IsRequest(msgs[0]):
			id, jsonRPC = msgs[0].ID, true
		case err != nil || batch:
			id, jsonRPC = json.RawMessage("null"), true
		}
	}
	writeRefusal(w, id, jsonRPC, rf)
}

// writeRefusal writes the answer of refuseProof, for a caller that
// recorded the decision itself: a JSON-RPC error with id when jsonRPC
// (and the refusal has one), {"error": reason} otherwise.
func writeRefusal(w http.ResponseWriter, id json.RawMessage, jsonRPC bool, rf *proof.Refusal) {
	var out []byte
	jsonRPC = jsonRPC && rf.RPC != nil
	if jsonRPC {
		out, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   any             `json:"error"`
		}{"2.0", id, rf.RPC})
	} else {
		out, _ = json.Marshal(map[string]string{"error": rf.Reason})
	}
	writeJSON(w, rf.Status, out, "no-store")
}

// proofOK is the decision reason of a request admitted with a verified
// request proof.
const proofOK = "proof_ok"

// serveProved serves an admitted request (serveAdmitted) through the
// response rewriting of wrapProofResponse. body is the JSON-RPC body the
// gate read (nil when it read none).
func (h *Handler) serveProved(w http.ResponseWriter, r *http.Request, next Next, d *vc.Delegation, rb *rpcBody, adm observe.Decision) error {
	w, finish := h.wrapProofResponse(w, r, rb.raw, d)
	w = h.proofs.RememberSession(r.Context(), w, rb.raw, delegationOwner(d))
	if err := h.serveAdmitted(w, r, next, d, rb, adm); err != nil {
		return err
	}
	return finish()
}

// delegationOwner is who the records a delegated request leaves in the
// shared store (session declarations, resumeTokens) count against: the
// user who delegated, not the agent, since an agent can mint agents of its
// own by sub-delegation while the user stays the chain's ("" for an
// anonymous request, which leaves no such record).
func delegationOwner(d *vc.Delegation) string {
	switch {
	case d == nil:
		return ""
	case d.UserDID != "":
		return d.UserDID
	default:
		return d.RootIssuer
	}
}

// wrapProofResponse signs the answer to an admitted request, and declares
// the extension in server/discover, when configured; finish writes the
// buffered answer after next returned.
func (h *Handler) wrapProofResponse(w http.ResponseWriter, r *http.Request, body []byte, d *vc.Delegation) (http.ResponseWriter, func() error) {
	if body == nil || !h.proofs.Rewrites(body) {
		return w, func() error { return nil }
	}
	aud, err := h.callerAudience(r, d)
	if err != nil {
		return w, func() error { return nil }
	}
	rw := h.proofs.WrapResponse(w, body, h.responseSigner(r), aud)
	return rw, rw.Finish
}

// responseSigner signs with the edge's current Level 2 key under its DID,
// the key published in its did.json.
func (h *Handler) responseSigner(r *http.Request) proof.Signer {
	return func() (kyaos.ResponseSigner, error) {
		if h.ident == nil {
			return kyaos.ResponseSigner{}, identity.ErrUnavailable
		}
		did, kid, key, err := h.ident.SigningKey(h.serviceHost(r))
		if err != nil {
			return kyaos.ResponseSigner{}, err
		}
		return kyaos.ResponseSigner{Key: key, DID: did, KID: kid}, nil
	}
}
