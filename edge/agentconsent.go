package edge

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
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

// agentConsent is where a prompt sends the user: consent_url, else, with
// the front door on, the edge's own agent consent page. The proof step
// (signed challenges) and the tool policy (prompts, and retries after an
// approval) share it.
type agentConsent struct {
	consentURL string
	front      *authserver.Server
	site       *site.Site
}

// on reports whether the edge's own consent page answers the route's
// prompts.
func (c *agentConsent) on() bool { return c.consentURL == "" && c.front != nil }

// url is the consent URL of a prompt for the refused call of tool by the
// caller holding d, with resume its resume token: consent_url when set,
// else the edge's agent consent page ("" for an anonymous caller, whom no
// delegation can name).
func (c *agentConsent) url(r *http.Request, tool string, dec mcp.Decision, d *vc.Delegation, resume string) string {
	if !c.on() {
		return c.consentURL
	}
	if d == nil || d.AgentDID == "" {
		return ""
	}
	link, ok := c.front.ConsentURL(c.site.Origin(r), authserver.AgentPrompt{
		AgentDID: d.AgentDID, Tool: tool, Missing: dec.Missing, Held: d.Scopes,
	}, resume, time.Now())
	if !ok {
		return ""
	}
	return link
}

// consented is the delegation the user approved at the edge's consent page
// for the prompt whose resume token the retried call m carries (in its
// _meta, or sealed in its requestState: stateResume), when the caller
// holding d was refused for missing scopes. It verifies like any
// credential and must name the same agent; the request then goes on with
// its identity.
func (p *toolPolicy) consented(r *http.Request, m mcp.Message, stateResume string, d *vc.Delegation, dec mcp.Decision) (*vc.Delegation, bool) {
	if !p.consent.on() || d == nil || dec.Allowed || dec.Reason != mcp.ReasonInsufficientScope {
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
	raw, ok, err := p.front.Approved(r.Context(), resume, d.AgentDID)
	if err != nil {
		p.logger.Warn("looking up a consent approval failed; answering the prompt again", zap.Error(err))
		return nil, false
	}
	if !ok {
		return nil, false
	}
	nd, err := p.admit.Verify(r, []byte(raw), nil)
	if err != nil || nd.AgentDID != d.AgentDID {
		if err != nil {
			p.logger.Warn("the approved delegation does not verify (is `trust authorization_server` set?)", zap.Error(err))
		}
		return nil, false
	}
	if err := p.identify(r, nd); err != nil {
		return nil, false
	}
	return nd, true
}
