package edge

// The edge's side of the tool policy step (edge/toolpolicy): its settings
// under their edge names, building it, and the other steps as it asks them.

import (
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/edge/toolpolicy"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The tool policy's settings are the step's own types (edge/toolpolicy);
// these names keep them where Config and its users have always found
// them, so the configuration's Go and JSON shapes do not change.
type (
	// PolicyConfig holds the MCP-aware authorization settings.
	PolicyConfig = toolpolicy.PolicyConfig
	// ToolPolicy is the rule for the tools whose name matches its Name.
	ToolPolicy = toolpolicy.ToolPolicy
	// RuleConfig is one operator rule.
	RuleConfig = toolpolicy.RuleConfig
	// ToolAnnotationsPolicy gives scopes by annotation class.
	ToolAnnotationsPolicy = toolpolicy.ToolAnnotationsPolicy
)

// ValidActionHost accepts a host name (no scheme, port or path) or
// "*.<host name>".
func ValidActionHost(s string) bool { return toolpolicy.ValidActionHost(s) }

// provisionPolicy builds the tool policy step (edge/toolpolicy) from the
// parts built before it; it runs at the end of build.
func (h *Handler) provisionPolicy() error {
	identify := identify(h.hooks, h.ident)
	parts := toolpolicy.Parts{Site: h.site, Recorder: h.obs, Logger: h.logger,
		Proofs: policyProofs{h.proofs}, Front: h.front, Consent: h.consent, Identity: h.ident,
		Limiter: h.limiter, Keys: h.keyStorage,
		// A delegation approved at the edge's consent page verifies like
		// any credential, and the host and the upstream learn who calls.
		Approve: func(r *http.Request, raw []byte) (*vc.Delegation, error) {
			d, err := h.admit.Verify(r, raw, nil)
			if err != nil {
				return nil, err
			}
			if err := identify(r, d); err != nil {
				return nil, err
			}
			return d, nil
		}}
	if h.l3.enabled {
		parts.Sessions = policySessions{&h.l3}
	}
	p, err := toolpolicy.New(h.ctx, &h.cfg.PolicyConfig, h.cfg.MaxBodySize, parts)
	if err != nil {
		return err
	}
	h.policy = p
	return nil
}

// policyProofs is the proof step as the tool policy asks it.
type policyProofs struct{ p *proofStep }

func (pp policyProofs) CheckResume(r *http.Request, m mcp.Message, tool string, d *vc.Delegation, adm observe.Decision) error {
	return pp.p.checkResume(r, m, tool, d, adm)
}

func (pp policyProofs) SignedChallenge(w http.ResponseWriter, r *http.Request, batch bool, m mcp.Message, tool string, dec mcp.Decision, d *vc.Delegation) ([]byte, bool) {
	return pp.p.signedChallenge(w, r, batch, m, tool, dec, d)
}

func (pp policyProofs) SignedDenial(w http.ResponseWriter, r *http.Request, batch bool, m mcp.Message, resp []byte, reason string, d *vc.Delegation) ([]byte, bool) {
	return pp.p.signedDenial(w, r, batch, m, resp, reason, d)
}

func (pp policyProofs) ResponseSigner(r *http.Request) proof.Signer { return pp.p.responseSigner(r) }

// policySessions is the Level 3 step as the tool policy asks it.
type policySessions struct{ l *level3 }

func (ps policySessions) Session(r *http.Request) (*vc.Delegation, error) { return ps.l.session(r) }

// Interface guards
var (
	_ toolpolicy.Proofs   = policyProofs{}
	_ toolpolicy.Sessions = policySessions{}
	_ toolpolicy.Consent  = (*agentConsent)(nil)
)
