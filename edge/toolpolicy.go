package edge

// The edge's side of the tool policy step (edge/toolpolicy): its settings
// under their edge names, and building it from the other steps.

import (
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/edge/level3"
	"github.com/mcpi-edge/caddy-mcpi/edge/proofstep"
	"github.com/mcpi-edge/caddy-mcpi/edge/toolpolicy"
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
		Proofs: h.proofs, Front: h.front, Consent: h.consent, Identity: h.ident,
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
	if h.l3 != nil {
		parts.Sessions = h.l3
	}
	p, err := toolpolicy.New(h.ctx, &h.cfg.PolicyConfig, h.cfg.MaxBodySize, parts)
	if err != nil {
		return err
	}
	h.policy = p
	return nil
}

// Interface guards: the steps are what the tool policy asks of them.
var (
	_ toolpolicy.Proofs   = (*proofstep.Step)(nil)
	_ toolpolicy.Sessions = (*level3.Step)(nil)
	_ toolpolicy.Consent  = (*agentConsent)(nil)
)
