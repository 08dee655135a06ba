package edge

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/framing"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/internal/loglimit"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
	"go.uber.org/zap"
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

// proofStep is the KYA-OS step of the pipeline: the declaration gate
// before admission, the request proof after it, and the edge's signed
// answers (response proofs, consent challenges, resume tokens). It knows
// the route through the fields below, set by provisionProofs.
type proofStep struct {
	*proof.Gate
	cfg  *Config
	site *site.Site
	// ident signs the edge's answers; nil below level 2.
	ident  *identity.Identity
	logger *zap.Logger
	// hostDID is the proofs' audience by Host.
	hostDID hostDID
	// consent is where a signed challenge sends the user.
	consent *agentConsent
	// resumeWarn limits the warnings that a resumeToken could not be
	// issued (kyaos_challenge.go).
	resumeWarn loglimit.Every
}

// provisionProofs builds the step; the nonce store is the route's.
func (h *Handler) provisionProofs() {
	gate := proof.New(proof.Config{
		RequestProof:     h.cfg.RequestProof,
		RequireExtension: h.cfg.RequireExtension,
		ResponseProof:    h.cfg.ResponseProof,
	}, observe.TraceResolver(h.didCache), h.l3.store)
	// 2025-11-25 clients declare once, in initialize: their sessions'
	// declarations are kept where the store keeps bindings (shared by
	// replicas with Redis). A store without bindings: they must declare
	// per request.
	if b, err := h.l3.proxySessionBinder(); err == nil {
		gate.WithSessions(b)
	}
	h.proofs = &proofStep{Gate: gate, cfg: &h.cfg, site: h.site, ident: h.ident, logger: h.logger, consent: h.consent}
}

// proofBody returns the JSON-RPC body the gate reads: the one the carriers
// read, else read now (carriers in the body may be off). Where the gate
// reads proofs or declarations, the body of any method but the bodyless
// ones is read whatever its Content-Type: MCP requires a POST of
// application/json, but an upstream need not check either, and a
// proof-bearing body sent as text/plain or with PUT must not pass unread
// under optional.
func (p *proofStep) proofBody(w http.ResponseWriter, r *http.Request, found *carrier.Found) ([]byte, error) {
	switch {
	case found.Body != nil:
		return found.Body, nil
	case p.Enabled() && !carrier.Bodyless(r.Method) && carrier.HasBody(r):
		// Any method that may carry a body, not only POST: an upstream
		// may take a PUT or a "post" for one.
	case p.SignsResponses() && carrier.WantsBody(r):
	default:
		return nil, nil
	}
	b, err := carrier.ReadBody(w, r, p.cfg.MaxBodySize)
	if err == nil {
		found.Body = b
	}
	return b, err
}

// negotiate applies the declaration gate.
func (p *proofStep) negotiate(r *http.Request, rb *framing.Body) error {
	if !p.RequiresExtension() {
		return nil
	}
	if rf := p.Negotiate(r.Context(), rb.ForGate(), r.Header.Get("Mcp-Session-Id")); rf != nil {
		return proofRefusal(rb, rf)
	}
	return nil
}

// admitProof checks the request proof of a request whose credential
// verified as d. d is nil for a request
// admitted without a credential (anonymous tools): its proof, by whichever
// agent, is checked all the same, only bound to no subject.
func (p *proofStep) admitProof(r *http.Request, rb *framing.Body, d *vc.Delegation) (verified bool, err error) {
	if !p.Inspects(rb.Raw()) {
		return false, nil
	}
	aud := p.audience(r)
	if !p.proofHostNamed(r) {
		aud = "" // matches no proof: audience_mismatch
	}
	agent, jkt := "", ""
	if d != nil {
		agent, jkt = d.AgentDID, d.CnfJKT
	}
	ok, rf := p.Admit(r.Context(), rb.ForGate(), aud, agent, jkt)
	if rf != nil {
		return false, proofRefusal(rb, rf)
	}
	return ok, nil
}

// proofHostNamed reports whether the proof audience may come from the
// request's Host. It may when edge_did or upstream_did fixes it, or when
// no audience is configured (the site is the edge's, as the operator
// wrote it). With audience configured and neither DID, the Host must be
// one those audiences name (its did:web, https:// origin or bare host):
// else a catch-all site would take a proof addressed to any server the
// client names in Host, and redeem it against a store that never saw it.
func (p *proofStep) proofHostNamed(r *http.Request) bool {
	if p.cfg.UpstreamDID != "" || p.cfg.EdgeDID != "" || len(p.cfg.Audiences) == 0 {
		return true
	}
	for _, name := range site.Audiences(p.site.Host(r)) {
		for _, a := range p.cfg.Audiences {
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
type hostDID struct{ last site.LastDerived }

// of is site.Audiences(host)[0]: did:web of host.
func (m *hostDID) of(host string) string {
	return m.last.Get(host, func(host string) string { return site.Audiences(host)[0] })
}

// proofRefusal answers a refused proof or declaration: a JSON-RPC request
// gets a JSON-RPC error (code and data.reason), as do a batch and a body
// the edge could not read (id null); anything else {"error": reason}. The
// status is the gate's.
func proofRefusal(rb *framing.Body, rf *proof.Refusal) *refusal.Refusal {
	var id json.RawMessage
	jsonRPC := false
	if rb.Raw() != nil {
		msgs, batch, err := rb.Messages()
		switch {
		case err == nil && !batch && len(msgs) == 1 && mcp.IsRequest(msgs[0]):
			id, jsonRPC = msgs[0].ID, true
		case err != nil || batch:
			id, jsonRPC = json.RawMessage("null"), true
		}
	}
	return &refusal.Refusal{Status: rf.Status, Reason: rf.Tag, Body: proofAnswer(id, jsonRPC, rf)}
}

// proofAnswer is the body of a refused proof: a JSON-RPC error with id
// when jsonRPC (and the refusal has one), {"error": reason} otherwise.
func proofAnswer(id json.RawMessage, jsonRPC bool, rf *proof.Refusal) []byte {
	var out []byte
	if jsonRPC && rf.RPC != nil {
		out, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   any             `json:"error"`
		}{"2.0", id, rf.RPC})
	} else {
		out, _ = json.Marshal(map[string]string{"error": rf.Reason})
	}
	return out
}

// proofOK is the decision reason of a request admitted with a verified
// request proof.
const proofOK = "proof_ok"

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

// wrap signs the answer to an admitted request, and declares
// the extension in server/discover, when configured; finish writes the
// buffered answer after next returned.
func (p *proofStep) wrap(w http.ResponseWriter, r *http.Request, body []byte, d *vc.Delegation) (http.ResponseWriter, func() error) {
	if body == nil || !p.Rewrites(body) {
		return w, func() error { return nil }
	}
	aud := p.callerAudience(r, d)
	rw := p.WrapResponse(w, body, p.responseSigner(r), aud)
	return rw, rw.Finish
}

// responseSigner signs with the edge's current Level 2 key under its DID,
// the key published in its did.json.
func (p *proofStep) responseSigner(r *http.Request) proof.Signer {
	return func() (kyaos.ResponseSigner, error) {
		if p.ident == nil {
			return kyaos.ResponseSigner{}, identity.ErrUnavailable
		}
		did, kid, key, err := p.ident.SigningKey(p.site.Host(r))
		if err != nil {
			return kyaos.ResponseSigner{}, err
		}
		return kyaos.ResponseSigner{Key: key, DID: did, KID: kid}, nil
	}
}
