package toolpolicy

// The per-tool policy's configuration: the rules an operator writes, how
// they become an mcp.Policy, and what Validate refuses.

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/edge/authzen"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// ToolPolicy is the rule for the tools whose name matches Name.
type ToolPolicy struct {
	// Tool name, or a glob in path.Match syntax ("*" does not match "/").
	// An exact name beats every glob; among globs the longest one wins.
	Name string `json:"name"`

	// Scopes the delegation must grant, every one of them (exact match).
	// Empty: any verified caller may call the tool, unless
	// tool_scope_convention requires "<tool>:execute".
	Scopes []string `json:"scopes,omitempty"`

	// Let callers without a credential call the tool. Cannot be combined
	// with scopes or require_presentation.
	AllowAnonymous bool `json:"allow_anonymous,omitempty"`

	// Require the delegation to be presented holder-bound: in a Verifiable
	// Presentation signed by the agent, or over a Level 3 handshake
	// session. A bare bearer credential is refused.
	RequirePresentation bool `json:"require_presentation,omitempty"`

	// Rules the calls of the tool must meet besides its scopes
	// (rules.go).
	Rules []RuleConfig `json:"rules,omitempty"`
}

// PolicyConfig holds the MCP-aware authorization settings (per-tool policy,
// tools/list filtering, handshake-action checks). edge.Config embeds it,
// so its fields are top-level JSON config fields of http.handlers.mcpi.
type PolicyConfig struct {
	// Per-tool rules for tools/call, also applied to tools/list answers,
	// which list only the tools the caller may call. At most one rule per
	// name or glob.
	Tools []ToolPolicy `json:"tools,omitempty"`

	// What happens to a tool no rule matches: "allow" or "deny". Default:
	// deny once any rule exists; with no rules every tool is allowed.
	ToolDefault string `json:"tool_default,omitempty"`

	// Apply the KYA-OS convention: a rule without scopes requires the
	// scope "<tool>:execute" of the called tool. Needs at least one rule
	// (`tool *` applies it to every tool without "/" in its name).
	ToolScopeConvention bool `json:"tool_scope_convention,omitempty"`

	// Consent page of the operator. A tools/call refused for missing
	// scopes then answers with an auth_required handshake action whose
	// authUrl is this URL with the query parameters tool, scopes,
	// agent_did and resume_token (an opaque random value the consent
	// service is expected to echo back). Without it the refusal is a plain
	// tool error naming the missing scopes.
	ConsentURL string `json:"consent_url,omitempty"`

	// What to do with handshake actions in upstream tool results (JSON and
	// SSE): "enforce" replaces an invalid action, or an authUrl that is not
	// https on the tool endpoint's own registrable domain, with a tool
	// error and logs it; "observe" only logs; "off" leaves results alone.
	// When the user DID is known, a valid authUrl gets context_did.
	// Default: enforce.
	HandshakeActions string `json:"handshake_actions,omitempty"`

	// Further hosts an authUrl may point to, besides the request Host's
	// registrable domain: exact host names, or "*.example.com".
	HandshakeActionHosts []string `json:"handshake_action_hosts,omitempty"`

	// Largest application/json answer (or SSE event) the edge reads to
	// filter tools/list or check tool results, in bytes. A larger one is
	// replaced by a JSON-RPC error. Default: 4194304.
	MaxResponseSize int64 `json:"max_response_size,omitempty"`

	// Scopes by annotation class (read_only, destructive, other) for the
	// tools no tool rule matches, the class learned from the upstream's
	// tools/list annotations; see ToolAnnotationsPolicy. Off when unset.
	// With it, tool_default defaults to deny even without tool rules.
	ToolAnnotationsPolicy *ToolAnnotationsPolicy `json:"tool_annotations_policy,omitempty"`

	// Rules every tools/call of the route must meet (rules.go).
	Rules []RuleConfig `json:"rules,omitempty"`

	// An OpenID AuthZEN PDP every tools/call the scopes and rules allowed
	// is sent to (authzen.go).
	AuthZEN *authzen.Config `json:"authzen,omitempty"`
}

// policy builds the mcp.Policy of the config; nil when nothing is to be
// enforced.
func (c *PolicyConfig) policy() (*mcp.Policy, error) {
	def, err := mcp.ParseDefaultAction(c.ToolDefault)
	if err != nil {
		return nil, fmt.Errorf("mcpi: tool_default must be allow or deny, got %q", c.ToolDefault)
	}
	if c.ToolAnnotationsPolicy != nil && def == mcp.DefaultUnset {
		def = mcp.DefaultDeny // an unseen tool never gets more than tool_default
	}
	if len(c.Tools) == 0 && def != mcp.DefaultDeny && c.ToolAnnotationsPolicy == nil && len(c.Rules) == 0 && c.AuthZEN == nil {
		return nil, nil
	}
	p := &mcp.Policy{Default: def, Rules: make([]mcp.ToolRule, len(c.Tools))}
	for i, t := range c.Tools {
		p.Rules[i] = mcp.ToolRule{
			Pattern:             t.Name,
			Scopes:              t.Scopes,
			AllowAnonymous:      t.AllowAnonymous,
			RequirePresentation: t.RequirePresentation,
		}
	}
	if c.ToolScopeConvention {
		p.ImpliedScope = mcp.DefaultScopeForTool
	}
	return p, nil
}

func (c *PolicyConfig) actionMode() (mcp.ActionMode, error) {
	if c.HandshakeActions == "" {
		return mcp.ActionsEnforce, nil
	}
	m, err := mcp.ParseActionMode(c.HandshakeActions)
	if err != nil {
		return 0, fmt.Errorf("mcpi: handshake_actions must be enforce, observe or off, got %q", c.HandshakeActions)
	}
	return m, nil
}

// Validate checks the settings, saying what to change.
func (c *PolicyConfig) Validate() error {
	pol, err := c.policy()
	if err != nil {
		return err
	}
	if pol != nil {
		if err := pol.Validate(); err != nil {
			return fmt.Errorf("mcpi: tool policy: %w", err)
		}
	}
	for _, t := range c.Tools {
		if t.AllowAnonymous && len(t.Scopes) > 0 {
			return fmt.Errorf("mcpi: tool %q: allow_anonymous cannot be combined with scopes", t.Name)
		}
	}
	if c.ToolScopeConvention && len(c.Tools) == 0 {
		return errors.New("mcpi: tool_scope_convention applies to tool rules without scopes, and there are none (add `tool *`)")
	}
	if c.ConsentURL != "" {
		u, err := url.Parse(c.ConsentURL)
		if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && u.Scheme != "http") {
			return fmt.Errorf("mcpi: consent_url %q is not an absolute http(s) URL without userinfo", c.ConsentURL)
		}
	}
	if _, err := c.actionMode(); err != nil {
		return err
	}
	for _, host := range c.HandshakeActionHosts {
		if !ValidActionHost(host) {
			return fmt.Errorf("mcpi: handshake_action_hosts: %q is not a host name or *.domain", host)
		}
	}
	if _, err := c.compileRules(); err != nil {
		return err
	}
	if c.AuthZEN != nil {
		if err := c.AuthZEN.Validate(); err != nil {
			return err
		}
	}
	if err := c.ToolAnnotationsPolicy.Validate(); err != nil {
		return err
	}
	if c.MaxResponseSize < 0 {
		return errors.New("mcpi: sizes must not be negative")
	}
	return nil
}

// ValidActionHost accepts a host name (no scheme, port or path) or
// "*.<host name>".
func ValidActionHost(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if s == "" || strings.HasPrefix(s, ".") {
		return false
	}
	return !strings.ContainsAny(s, "/:@?#*[]\\ \t\r\n")
}
