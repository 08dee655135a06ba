package toolpolicy

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// With the front door on and no consent_url, the edge is its own consent
// service for KYA-OS prompts: the 2025 needs_authorization result and the
// 2026 input-required consent link to its agent consent page
// (edge/authserver kya.go). Approving there has the signed-in user issue a
// delegation to the agent for the scopes it held and the missing ones; the
// retry that carries the prompt's resume token (or its sealed
// requestState) is then decided with that delegation, and goes on with
// its identity.

// consented is the delegation the user approved at the edge's consent page
// for the prompt whose resume token the retried call m carries (in its
// _meta, or sealed in its requestState: stateResume), when the caller
// holding d was refused for missing scopes. It verifies like any
// credential and must name the same agent; the request then goes on with
// its identity.
func (p *Policy) consented(r *http.Request, m mcp.Message, stateResume string, d *vc.Delegation, dec mcp.Decision) (*vc.Delegation, bool) {
	if !p.parts.Consent.Own() || d == nil || dec.Allowed || dec.Reason != mcp.ReasonInsufficientScope {
		return nil, false
	}
	resume := stateResume
	if resume == "" {
		tok, ok, err := proof.ResumeToken(m.Params)
		if err != nil || !ok {
			return nil, false
		}
		resume = tok
	}
	raw, ok, err := p.parts.Front.Approved(r.Context(), resume, d.AgentDID)
	if err != nil {
		p.parts.Logger.Warn("looking up a consent approval failed; answering the prompt again", zap.Error(err))
		return nil, false
	}
	if !ok {
		return nil, false
	}
	nd, err := p.parts.Approve(r, []byte(raw))
	if err != nil || nd.AgentDID != d.AgentDID {
		if err != nil {
			p.parts.Logger.Warn("the approved delegation does not verify, or the edge could not tell the upstream who calls with it (is `trust authorization_server` set?)", zap.Error(err))
		}
		return nil, false
	}
	return nd, true
}
