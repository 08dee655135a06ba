package edge

import (
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// agentConsent is where a prompt sends the user: consent_url, else, with
// the front door on, the edge's own agent consent page. The proof step
// (signed challenges) and the tool policy (prompts, and retries after an
// approval) share it.
type agentConsent struct {
	consentURL string
	front      *authserver.Server
	site       *site.Site
}

// Own reports whether the edge's own consent page answers the route's
// prompts.
func (c *agentConsent) Own() bool { return c.consentURL == "" && c.front != nil }

// URL is the consent URL of a prompt for the refused call of tool by the
// caller holding d, with resume its resume token: consent_url when set,
// else the edge's agent consent page ("" for an anonymous caller, whom no
// delegation can name).
func (c *agentConsent) URL(r *http.Request, tool string, dec mcp.Decision, d *vc.Delegation, resume string) string {
	if !c.Own() {
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
