package edge

import (
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// The signed consent challenge (docs/protocol/kyaos.md#signed-consent-challenge): with response_proof sign, a
// tools/call refused for a missing scope is answered with the
// needs_authorization result, signed by the edge (outcome
// needs_authorization, its responseHash binding the challenge and so the
// consent URL), carrying a resumeToken the edge issued (edge/proof
// resume.go). The retry is a new request: every check runs again, and a
// resumeToken of the edge's it carries must be live, unused, and issued to
// this agent for this tool.

// resumeWarnInterval is the least time between two warnings that a
// resumeToken could not be issued: callers cause them, and a store that
// is down or full fails every one.
const resumeWarnInterval = 30 * time.Second

// signedChallenge is the signed needs_authorization answer to the denied
// call m of tool; ok is false when the edge does not sign responses, the
// caller is anonymous, no consent URL is usable, the call is one of a batch (2026 clients send
// none), or signing failed: the unsigned prompt of today answers then.
func (p *proofStep) signedChallenge(w http.ResponseWriter, r *http.Request, batch bool, m mcp.Message, tool string, dec mcp.Decision, d *vc.Delegation) ([]byte, bool) {
	// An anonymous caller gets the unsigned prompt: a resumeToken is a
	// record in the shared store, which no anonymous request may write.
	if batch || d == nil || !p.SignsResponses() || (p.cfg.ConsentURL == "" && !p.consent.Own()) || len(dec.Missing) == 0 ||
		(dec.Reason != mcp.ReasonInsufficientScope && dec.Reason != mcp.ReasonAnonymous) {
		return nil, false
	}
	agent := d.AgentDID
	now := time.Now()
	token, exp, err := p.IssueResume(r.Context(), delegationOwner(d), agent, tool, now)
	if err != nil {
		if p.resumeWarn.Allow(resumeWarnInterval) {
			p.logger.Warn("issuing a resumeToken failed; answering the unsigned consent prompt (logged at most every 30s)", zap.Error(err))
		}
		return nil, false
	}
	link, ok := mcp.ConsentLink(mcp.NeedsAuthorization{Tool: tool, Missing: dec.Missing, ConsentURL: p.consent.URL(r, tool, dec, d, token), AgentDID: agent, ResumeToken: token})
	if !ok {
		return nil, false
	}
	s, err := p.responseSigner(r)()
	if err != nil {
		p.logger.Warn("signing the consent challenge failed; answering the unsigned prompt", zap.Error(err))
		return nil, false
	}
	// The challenge holds resultType besides content: like any such result
	// it is signed under the envelope profile, which binds all of it.
	s.Envelope = true
	aud := p.callerAudience(r, d)
	result, err := s.SignChallenge(m.Raw, aud, kyaos.Challenge{
		Tool: tool, ScopeID: dec.Missing[0], Scopes: dec.Missing,
		AuthorizationURL: link, ResumeToken: token, ExpiresAt: exp.Unix(),
	}, now.Unix())
	if err != nil {
		p.logger.Warn("signing the consent challenge failed; answering the unsigned prompt", zap.Error(err))
		return nil, false
	}
	out, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", m.ID, result})
	if err != nil {
		return nil, false
	}
	proof.MarkSigned(w) // the answer is signed already: not again
	return out, true
}

// signedDenial signs the edge's refusal resp of the denied call m (a tool
// error result) with outcome denied and the refusal's reason, as KYA-OS
// §4.1 has a server state what it decided (no responseHash); ok is false
// when the edge does not sign responses or resp is not one result (the
// response writer then signs or passes it as any answer).
func (p *proofStep) signedDenial(w http.ResponseWriter, r *http.Request, batch bool, m mcp.Message, resp []byte, reason string, d *vc.Delegation) ([]byte, bool) {
	if batch || !p.SignsResponses() {
		return nil, false
	}
	result := jsonscan.Member(resp, "result")
	if len(result) == 0 || result[0] != '{' {
		return nil, false
	}
	s, err := p.responseSigner(r)()
	if err != nil {
		return nil, false
	}
	s.Envelope = p.SignsEnvelope() || !kyaos.ContentOnly(result)
	aud := p.callerAudience(r, d)
	signed, err := s.SignResult(result, m.Raw, aud, kyaos.ResponseMeta{Outcome: kyaos.OutcomeDenied, Reason: reason}, time.Now().Unix())
	if err != nil {
		return nil, false
	}
	proof.MarkSigned(w)
	return jsonscan.SetMember(resp, "result", signed), true
}

// callerAudience is the audience of the edge's response proofs: the
// caller's DID (docs/protocol/kyaos.md#response-proofs), else the route's.
func (p *proofStep) callerAudience(r *http.Request, d *vc.Delegation) string {
	if d != nil && d.AgentDID != "" {
		return d.AgentDID
	}
	return p.audience(r)
}

// checkResume checks the resumeToken a retried tools/call m of tool
// carries, when it is one of the edge's, and consumes it; handled: the
// refusal is returned and nothing is forwarded. A token of the upstream's
// (without the edge's prefix) passes on unchecked.
func (p *proofStep) checkResume(r *http.Request, m mcp.Message, tool string, d *vc.Delegation, adm observe.Decision) error {
	token, ok, err := proof.ResumeToken(m.Params)
	var rf *proof.Refusal
	switch {
	case err != nil:
		rf = proof.ResumeMalformedRefusal()
	case !ok || !proof.IsEdgeResume(token):
		return nil
	default:
		agent := ""
		if d != nil {
			agent = d.AgentDID
		}
		if rf = p.RedeemResume(r.Context(), token, delegationOwner(d), agent, tool, time.Now()); rf == nil {
			return nil
		}
	}
	return &refusal.Refusal{Status: rf.Status, Reason: rf.Tag, Body: proofAnswer(m.ID, true, rf),
		Decision: &observe.Decision{Outcome: "rejected", Reason: rf.Tag, Status: rf.Status, Delegation: adm.Delegation, Carrier: adm.Carrier, Tool: tool}}
}
