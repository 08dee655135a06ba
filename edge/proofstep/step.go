package proofstep

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/framing"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// ReadBody returns the JSON-RPC body the gate reads: the one the carriers
// read, else read now (carriers in the body may be off). Where the gate
// reads proofs or declarations, the body of any method but the bodyless
// ones is read whatever its Content-Type: MCP requires a POST of
// application/json, but an upstream need not check either, and a
// proof-bearing body sent as text/plain or with PUT must not pass unread
// under optional.
func (p *Step) ReadBody(w http.ResponseWriter, r *http.Request, found *carrier.Found) ([]byte, error) {
	switch {
	case found.Body != nil:
		return found.Body, nil
	case p.gate.Enabled() && !carrier.Bodyless(r.Method) && carrier.HasBody(r):
		// Any method that may carry a body, not only POST: an upstream
		// may take a PUT or a "post" for one.
	case p.gate.SignsResponses() && carrier.WantsBody(r):
	default:
		return nil, nil
	}
	b, err := carrier.ReadBody(w, r, p.route.MaxBody)
	if err == nil {
		found.Body = b
	}
	return b, err
}

// Negotiate applies the declaration gate; a refusal is a
// *refusal.Refusal.
func (p *Step) Negotiate(r *http.Request, rb *framing.Body) error {
	if !p.gate.RequiresExtension() {
		return nil
	}
	if rf := p.gate.Negotiate(r.Context(), rb.ForGate(), r.Header.Get("Mcp-Session-Id")); rf != nil {
		return proofRefusal(rb, rf)
	}
	return nil
}

// Admit checks the request proof of a request whose credential verified
// as d, and reports whether a proof was verified (the body then must not
// be edited outside _meta: the proof covers it); a refusal is a
// *refusal.Refusal. d is nil for a request admitted without a credential
// (anonymous tools): its proof, by whichever agent, is checked all the
// same, only bound to no subject.
func (p *Step) Admit(r *http.Request, rb *framing.Body, d *vc.Delegation) (verified bool, err error) {
	if !p.gate.Inspects(rb.Raw()) {
		return false, nil
	}
	aud := p.Audience(r)
	if !p.proofHostNamed(r) {
		aud = "" // matches no proof: audience_mismatch
	}
	agent, jkt := "", ""
	if d != nil {
		agent, jkt = d.AgentDID, d.CnfJKT
	}
	ok, rf := p.gate.Admit(r.Context(), rb.ForGate(), aud, agent, jkt)
	if rf != nil {
		return false, proofRefusal(rb, rf)
	}
	return ok, nil
}

// ReasonProofOK is the decision reason of a request admitted with a
// verified request proof.
const ReasonProofOK = "proof_ok"

// Audience is the DID a request proof must name: upstream_did, else
// edge_did, else did:web of the Host.
func (p *Step) Audience(r *http.Request) string {
	if p.route.UpstreamDID != "" {
		return p.route.UpstreamDID
	}
	if p.route.EdgeDID != "" {
		return p.route.EdgeDID
	}
	return p.hostDID.of(p.parts.Site.Host(r))
}

// proofHostNamed reports whether the proof audience may come from the
// request's Host. It may when edge_did or upstream_did fixes it, or when
// no audience is configured (the site is the edge's, as the operator
// wrote it). With audience configured and neither DID, the Host must be
// one those audiences name (its did:web, https:// origin or bare host):
// else a catch-all site would take a proof addressed to any server the
// client names in Host, and redeem it against a store that never saw it.
func (p *Step) proofHostNamed(r *http.Request) bool {
	if p.route.UpstreamDID != "" || p.route.EdgeDID != "" || len(p.route.Audiences) == 0 {
		return true
	}
	for _, name := range site.Audiences(p.parts.Site.Host(r)) {
		for _, a := range p.route.Audiences {
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

// Wrap installs the step's part of the response chain for an admitted
// request with body (d nil: admitted anonymously), as the handler's chain
// is read, outermost (nearest the client) first: the signing of the
// answer and the declaration of the extension in server/discover, when
// configured, then the memory of a 2025-11-25 session's declaration.
// finish writes the buffered answer after next returned.
func (p *Step) Wrap(w http.ResponseWriter, r *http.Request, body []byte, d *vc.Delegation) (http.ResponseWriter, func() error) {
	w, finish := p.sign(w, r, body, d)
	return p.gate.RememberSession(r.Context(), w, body, delegationOwner(d)), finish
}

// sign signs the answer to an admitted request, and declares the extension
// in server/discover, when configured.
func (p *Step) sign(w http.ResponseWriter, r *http.Request, body []byte, d *vc.Delegation) (http.ResponseWriter, func() error) {
	if body == nil || !p.gate.Rewrites(body) {
		return w, func() error { return nil }
	}
	aud := p.callerAudience(r, d)
	rw := p.gate.WrapResponse(w, body, p.Signer(r), aud)
	return rw, rw.Finish
}

// Signer signs with the edge's current Level 2 key under its DID, the key
// published in its did.json.
func (p *Step) Signer(r *http.Request) proof.Signer {
	return func() (kyaos.ResponseSigner, error) {
		if p.parts.Identity == nil {
			return kyaos.ResponseSigner{}, identity.ErrUnavailable
		}
		did, kid, key, err := p.parts.Identity.SigningKey(p.parts.Site.Host(r))
		if err != nil {
			return kyaos.ResponseSigner{}, err
		}
		return kyaos.ResponseSigner{Key: key, DID: did, KID: kid}, nil
	}
}
