package toolpolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/rules"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Operator rules (docs/config/rules.md): CEL conditions a tools/call must
// meet on top of the scopes of its tool rule. A rule only ever narrows: it
// is checked once the scopes allowed the call, and a rule that is false,
// or that cannot be evaluated, refuses it. The same rules decide what
// tools/list shows, with the arguments not yet known: a tool whose rules
// cannot hold for this caller is not listed.

// RuleConfig is one operator rule.
type RuleConfig struct {
	// Name names the rule in the audit log and in the denial.
	Name string `json:"name"`
	// Expression is a CEL condition; true admits the call.
	Expression string `json:"expression"`
	// Message tells a refused caller why, in the operator's words.
	Message string `json:"message,omitempty"`
}

// toolRules is the compiled rules of a route.
type toolRules struct {
	// route applies to every tool; byPattern to the tools a tool rule
	// (by its name or glob) decides.
	route     []*checkedRule
	byPattern map[string][]*checkedRule
}

// checkedRule is a compiled rule and which kinds of evaluation error were
// logged for it: each kind once, not on every call it refuses, and a
// caller's own error cannot hide another kind from the operator.
type checkedRule struct {
	*rules.Rule
	logged atomic.Uint32
}

// compileRules compiles the rules of c; nil when there are none.
func (c *PolicyConfig) compileRules() (*toolRules, error) {
	tr := &toolRules{byPattern: make(map[string][]*checkedRule)}
	names := make(map[string]bool)
	add := func(where string, rc RuleConfig) (*checkedRule, error) {
		if names[rc.Name] {
			return nil, fmt.Errorf("mcpi: %s: rule %q: a rule name may be used once per route, so the audit log tells which one refused", where, rc.Name)
		}
		names[rc.Name] = true
		if rc.Name == pdpRuleName && c.AuthZEN != nil {
			return nil, fmt.Errorf("mcpi: %s: rule %q: the name is the AuthZEN PDP's in denials and the audit log; choose another", where, rc.Name)
		}
		r, err := rules.Compile(rc.Name, rc.Expression, rc.Message)
		if err != nil {
			return nil, fmt.Errorf("mcpi: %s: %w", where, err)
		}
		return &checkedRule{Rule: r}, nil
	}
	n := 0
	for _, rc := range c.Rules {
		r, err := add("rules", rc)
		if err != nil {
			return nil, err
		}
		tr.route = append(tr.route, r)
		n++
	}
	for _, t := range c.Tools {
		for _, rc := range t.Rules {
			r, err := add(fmt.Sprintf("tool %q", t.Name), rc)
			if err != nil {
				return nil, err
			}
			tr.byPattern[t.Name] = append(tr.byPattern[t.Name], r)
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	return tr, nil
}

// readsTools reports whether rules or a PDP read what the upstream lists of
// its tools (tool.annotations).
func (c *PolicyConfig) readsTools() bool {
	if len(c.Rules) > 0 || c.AuthZEN != nil {
		return true
	}
	for _, t := range c.Tools {
		if len(t.Rules) > 0 {
			return true
		}
	}
	return false
}

func eraName(e mcp.Era) string {
	if e == mcp.Era2026 {
		return "2026"
	}
	return "2025"
}

// applyRules checks the rules that apply to a call of tool that dec
// allowed; m is the tools/call (nil when deciding a listing). It returns
// dec, or the refusal of the first rule that does not hold.
func (p *Policy) applyRules(in *rules.Input, m *mcp.Message, tool string, dec mcp.Decision) mcp.Decision {
	tr := p.rules
	if tr == nil || in == nil || !dec.Allowed || dec.Reason == reasonHandshakeTool {
		return dec
	}
	var byTool []*checkedRule
	if dec.Rule != nil {
		byTool = tr.byPattern[dec.Rule.Pattern]
	}
	call := forTool(in, tool) // the request's bindings, with this call's tool and arguments
	if m != nil && (readArguments(tr.route) || readArguments(byTool)) {
		var ok bool
		if call.Arguments, ok = mcp.ToolCallArguments(*m); !ok {
			// Unreadable params: a rule reading the arguments fails, closed.
			call.Arguments = json.RawMessage("unreadable")
		}
	}
	check := func(list []*checkedRule) (mcp.Decision, bool) {
		for _, r := range list {
			var ok bool
			var err error
			if m == nil {
				ok, err = r.EvalListing(&call)
			} else {
				ok, err = r.Eval(&call)
			}
			switch {
			case err != nil:
				p.logRuleError(r, tool, err)
				return mcp.Decision{Rule: dec.Rule, Reason: mcp.ReasonPolicyError, RuleName: r.Name}, false
			case !ok:
				return mcp.Decision{Rule: dec.Rule, Reason: mcp.ReasonRuleDenied, RuleName: r.Name, Message: r.Message}, false
			}
		}
		return dec, true
	}
	if d, ok := check(tr.route); !ok {
		return d
	}
	if d, ok := check(byTool); !ok {
		return d
	}
	return dec
}

// readArguments reports whether a rule of list reads the call's arguments.
func readArguments(list []*checkedRule) bool {
	for _, r := range list {
		if r.ReadsArguments() {
			return true
		}
	}
	return false
}

// logRuleError logs the first evaluation error of a rule. The error names
// what the rule could not read, never an argument's value: CEL's messages
// name keys, overloads and limits.
func (p *Policy) logRuleError(r *checkedRule, tool string, err error) {
	kind, bit := ruleErrorKind(err)
	if r.logged.Or(bit)&bit != 0 {
		return
	}
	p.parts.Logger.Warn("mcpi: a tool rule could not be evaluated; the calls it decides are refused (policy_error). Logged once per rule and kind of error.",
		zap.String("rule", r.Name), zap.String("tool", p.toolLabel(tool)), zap.String("error", kind))
}

// ruleErrorKind names the kind of a rule's evaluation error, and its bit
// in checkedRule.logged. CEL's own messages quote the values they failed
// on (a map key, a timestamp's text), which may be the call's arguments:
// only the kind is logged.
func ruleErrorKind(err error) (string, uint32) {
	msg := err.Error()
	switch {
	case errors.Is(err, rules.ErrArguments):
		return "the call's arguments cannot be read by a rule (not an object, a member name repeated, a member the rule reads given in another letter case, nested too deep, a list too long, a number out of range)", 1 << 0
	case strings.Contains(msg, "cost limit"):
		return "the rule's cost limit was exceeded", 1 << 1
	case strings.Contains(msg, "interrupted"):
		return "the rule's time limit was exceeded", 1 << 2
	case strings.Contains(msg, "no such key"), strings.Contains(msg, "no such attribute"):
		return "the rule reads a key or attribute the call does not have (guard it with has())", 1 << 3
	case strings.Contains(msg, "no such overload"), strings.Contains(msg, "no matching overload"):
		return "the rule applies an operator or function to a value of another type", 1 << 4
	case strings.Contains(msg, "not a bool"):
		return "the rule gave a value that is not a bool", 1 << 5
	default:
		return "the rule failed at run time (a conversion, a division by zero or the like)", 1 << 6
	}
}

// ruleDeniedResult is the tool error answering a call a rule refused.
func ruleDeniedResult(era mcp.Era, id []byte, tool string, dec mcp.Decision) []byte {
	if dec.Reason == mcp.ReasonPolicyError {
		text := fmt.Sprintf("Tool %q could not be authorized: the operator's rule %q could not be evaluated for this call. The edge's log says why.", tool, dec.RuleName)
		if dec.RuleName == pdpRuleName {
			text = pdpErrorText(tool)
		}
		return mcp.ToolErrorResultFor(era, id, text,
			map[string]any{"error": "policy_error", "toolName": tool, "rule": dec.RuleName})
	}
	msg := dec.Message
	if msg == "" {
		msg = fmt.Sprintf("Tool %q is not available for this call: the operator's rule %q does not allow it.", tool, dec.RuleName)
	}
	return mcp.ToolErrorResultFor(era, id, msg,
		map[string]any{"error": "rule_denied", "toolName": tool, "rule": dec.RuleName})
}

// rulesInput is ruleInput when the route has rules or a PDP, else nil
// (nothing built on the hot path).
func (p *Policy) rulesInput(r *http.Request, method string, d *vc.Delegation, adm observe.Decision, presented bool) *rules.Input {
	if p.rules == nil && p.pdp == nil {
		return nil
	}
	return p.ruleInput(r, method, d, adm, presented)
}

// listedByRules reports whether the rules let tool be listed for the
// request in (nil: no rules).
func (p *Policy) listedByRules(in *rules.Input, tool string) bool {
	if in == nil {
		return true
	}
	if slices.Contains(handshakeTools, tool) && !p.pol.KnownTool(tool) {
		return true // protocol, not a capability: rules do not apply, as on the call
	}
	dec := p.decide(ruleHost(in), tool, nil, false)
	dec.Allowed = true // toolAllowed decided; only the rule that applies matters here
	return p.applyRules(in, nil, tool, dec).Allowed
}

// compileRules compiles the route's rules.
