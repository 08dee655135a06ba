package mcp

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// DefaultAction is what a Policy does with a tool no rule matches.
type DefaultAction uint8

const (
	// DefaultUnset denies unmatched tools once the policy has any rule, and
	// allows every tool when it has none (no per-tool policy configured).
	DefaultUnset DefaultAction = iota
	// DefaultDeny denies unmatched tools, even with no rules.
	DefaultDeny
	// DefaultAllow allows unmatched tools to every caller the route let in.
	DefaultAllow
)

// String returns "", "deny" or "allow".
func (a DefaultAction) String() string {
	switch a {
	case DefaultDeny:
		return "deny"
	case DefaultAllow:
		return "allow"
	default:
		return ""
	}
}

// ParseDefaultAction reads "deny", "allow" or "" (DefaultUnset), for config.
func ParseDefaultAction(s string) (DefaultAction, error) {
	switch s {
	case "":
		return DefaultUnset, nil
	case "deny":
		return DefaultDeny, nil
	case "allow":
		return DefaultAllow, nil
	}
	return DefaultUnset, fmt.Errorf("mcp: unknown default action %q (want deny or allow)", s)
}

// ToolRule is the policy for the tools whose name matches Pattern.
type ToolRule struct {
	// Pattern is an exact tool name, or a glob with path.Match semantics
	// ("*" does not match "/"; a pattern containing one of `*?[\` is a
	// glob).
	Pattern string
	// Scopes must all be granted (exact string match). When empty, any
	// verified caller passes, unless Policy.ImpliedScope says otherwise.
	Scopes []string
	// AllowAnonymous makes the tools public: callers without a verified
	// credential pass, and scopes are not checked for anyone.
	AllowAnonymous bool
	// RequirePresentation demands that the credential was presented in a
	// holder-bound form (a Verifiable Presentation or a Level 3 session),
	// not as a bare bearer credential.
	RequirePresentation bool
}

func (r *ToolRule) isGlob() bool { return strings.ContainsAny(r.Pattern, `*?[\`) }

// Policy decides per tool whether a tools/call may pass. It knows nothing of
// how the scopes were granted, so the same rules serve every credential
// format and carrier.
type Policy struct {
	// Rules, in any order: an exact rule beats every glob, and among globs
	// the longest pattern wins (the first listed on a tie).
	Rules []ToolRule
	// Default applies to tools no rule matches.
	Default DefaultAction
	// ImpliedScope, when set, gives the scope required by a matching rule
	// that lists no Scopes, e.g. DefaultScopeForTool for the KYA convention
	// "<tool>:execute". A rule {Pattern: "*"} with it requires every tool's
	// own scope.
	ImpliedScope func(tool string) string
}

// DefaultScopeForTool is the KYA-OS default scope of a tool, "<tool>:execute"
// (docs/protocol/mcpi.md#tool-policy-answers).
func DefaultScopeForTool(tool string) string { return tool + ":execute" }

// Decision reasons: a short, bounded set, usable as metric label values.
const (
	ReasonNoPolicy             = "no_policy"             // allowed: no rules and no default
	ReasonDefaultAllow         = "default_allow"         // allowed: no rule matched, Default is allow
	ReasonNoMatchingRule       = "no_matching_rule"      // denied: no rule matched
	ReasonPublic               = "public"                // allowed: the rule allows anonymous callers
	ReasonAnonymous            = "anonymous"             // denied: no verified credential
	ReasonPresentationRequired = "presentation_required" // denied: not presented holder-bound
	ReasonInsufficientScope    = "insufficient_scope"    // denied: Missing lists the scopes
	ReasonGranted              = "granted"               // allowed: every required scope granted
	ReasonRuleDenied           = "rule_denied"           // denied: an operator's rule did not hold; RuleName names it
	ReasonPolicyError          = "policy_error"          // denied: a rule could not be evaluated; RuleName names it
)

// Decision is the outcome of Policy.Decide.
type Decision struct {
	Allowed bool
	// Rule is the rule that decided, pointing into Policy.Rules; nil when
	// no rule matched.
	Rule *ToolRule
	// Missing are the required scopes that were not granted, in rule
	// order; set for denials by ReasonInsufficientScope,
	// ReasonPresentationRequired and ReasonAnonymous so the caller can ask
	// for consent.
	Missing []string
	// Reason is one of the Reason constants.
	Reason string
	// RuleName and Message are the operator's rule that refused the call
	// and its explanation (ReasonRuleDenied, ReasonPolicyError).
	RuleName, Message string
}

// Decide applies the policy to a call of tool by a caller holding the granted
// scopes. anonymous means no credential was verified (the route let the
// request in anyway); presented means the credential was holder-bound.
func (p *Policy) Decide(tool string, granted []string, anonymous, presented bool) Decision {
	r := p.match(tool)
	if r == nil {
		switch {
		case p.Default == DefaultAllow:
			return Decision{Allowed: true, Reason: ReasonDefaultAllow}
		case p.Default == DefaultUnset && len(p.Rules) == 0:
			return Decision{Allowed: true, Reason: ReasonNoPolicy}
		default:
			return Decision{Reason: ReasonNoMatchingRule}
		}
	}
	if r.AllowAnonymous {
		return Decision{Allowed: true, Rule: r, Reason: ReasonPublic}
	}
	required := r.Scopes
	if len(required) == 0 && p.ImpliedScope != nil {
		required = []string{p.ImpliedScope(tool)}
	}
	var missing []string
	if anonymous {
		// Nothing is granted without a credential; report what consent
		// would have to cover.
		missing = slices.Clone(required)
	} else {
		for _, s := range required {
			if !slices.Contains(granted, s) {
				missing = append(missing, s)
			}
		}
	}
	switch {
	case anonymous:
		return Decision{Rule: r, Missing: missing, Reason: ReasonAnonymous}
	case r.RequirePresentation && !presented:
		return Decision{Rule: r, Missing: missing, Reason: ReasonPresentationRequired}
	case len(missing) > 0:
		return Decision{Rule: r, Missing: missing, Reason: ReasonInsufficientScope}
	}
	return Decision{Allowed: true, Rule: r, Reason: ReasonGranted}
}

// match returns the deciding rule for tool: an exact rule, else the longest
// matching glob. A linear scan: policies hold tens of rules, and a map would
// need a constructor or a lazily built (racy) index.
func (p *Policy) match(tool string) *ToolRule {
	var best *ToolRule
	for i := range p.Rules {
		r := &p.Rules[i]
		if !r.isGlob() {
			if r.Pattern == tool {
				return r
			}
			continue
		}
		if best != nil && len(r.Pattern) <= len(best.Pattern) {
			continue
		}
		if ok, _ := path.Match(r.Pattern, tool); ok {
			best = r
		}
	}
	return best
}

// KnownTool reports whether an exact rule names tool. It is a bounded set,
// fit for LabelForTool.
func (p *Policy) KnownTool(tool string) bool {
	for i := range p.Rules {
		if r := &p.Rules[i]; !r.isGlob() && r.Pattern == tool {
			return true
		}
	}
	return false
}

// Validate reports configuration mistakes: empty or malformed patterns, an
// exact pattern listed twice, empty scopes, and AllowAnonymous together with
// RequirePresentation (an anonymous caller presents nothing).
func (p *Policy) Validate() error {
	var errs []error
	seen := make(map[string]bool, len(p.Rules))
	for i := range p.Rules {
		r := &p.Rules[i]
		switch {
		case r.Pattern == "":
			errs = append(errs, fmt.Errorf("mcp: tool rule %d: empty pattern", i))
		case r.isGlob():
			if _, err := path.Match(r.Pattern, ""); err != nil {
				errs = append(errs, fmt.Errorf("mcp: tool rule %d: pattern %q: %w", i, r.Pattern, err))
			}
		}
		if seen[r.Pattern] {
			errs = append(errs, fmt.Errorf("mcp: tool rule %d: pattern %q listed twice", i, r.Pattern))
		}
		seen[r.Pattern] = true
		if slices.Contains(r.Scopes, "") {
			errs = append(errs, fmt.Errorf("mcp: tool rule %d: empty scope", i))
		}
		if r.AllowAnonymous && r.RequirePresentation {
			errs = append(errs, fmt.Errorf("mcp: tool rule %d: allow_anonymous contradicts require_presentation", i))
		}
	}
	if p.Default > DefaultAllow {
		errs = append(errs, fmt.Errorf("mcp: unknown default action %d", p.Default))
	}
	return errors.Join(errs...)
}

// maxLabelLen bounds a tool name used as a metric label.
const maxLabelLen = 64

// LabelForTool returns name as a metric label value when known(name) says it
// is one of a bounded set (e.g. Policy.KnownTool, or the tools the upstream
// listed), else "other". Tool names come from clients: labelling by raw name
// would let any caller create unbounded time series.
func LabelForTool(name string, known func(string) bool) string {
	if known == nil || name == "" || len(name) > maxLabelLen || !known(name) {
		return "other"
	}
	return name
}
