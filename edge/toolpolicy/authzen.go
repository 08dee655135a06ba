package toolpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/edge/authzen"
	"github.com/mcpi-edge/caddy-mcpi/edge/rules"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// The external decision point (docs/config/rules.md, "authzen"): once the
// scopes and the operator's rules allowed a tools/call, the route's
// AuthZEN PDP is asked, and only its decision true lets the call go on.
// No answer, a late one or a malformed one refuses the call: the PDP is
// a gate, so the edge fails closed.

// pdpRuleName names the PDP in denials and in the audit log's "rule".
const pdpRuleName = "authzen"

// pdpLogEvery spaces the PDP's failure logs: an outage refuses every call
// and must not write a line for each.
const pdpLogEvery = 10 * time.Second

// pdpState is the runtime state of a route's PDP.
type pdpState struct {
	client  *authzen.Client
	lastLog atomic.Int64 // unix nanoseconds of the last failure logged
}

func newPDP(c *authzen.Config) (*pdpState, error) {
	if c == nil {
		return nil, nil
	}
	cl, err := authzen.New(c, nil)
	if err != nil {
		return nil, err
	}
	return &pdpState{client: cl}, nil
}

// pdpRequest is the Access Evaluation request of a call: the agent is the
// subject; the user, the delegation, the request and the arguments are
// context; the tool is the resource. args marshals to the call's own
// arguments text (rules.ReadObject), nil when not known.
func pdpRequest(in *rules.Input, tool string, args any) *authzen.Request {
	sub := authzen.Entity{Type: "agent"}
	agent := in.Var(rules.VarAgent)
	if did, _ := agent["did"].(string); did != "" {
		sub.ID = did
		if rep, ok := agent["reputation"]; ok {
			sub.Properties = map[string]any{"reputation": rep}
		}
	} else {
		sub = authzen.Entity{Type: "anonymous", ID: "anonymous"}
	}
	ctx := map[string]any{"request": in.Var(rules.VarRequest), "arguments": args}
	if did, _ := in.Var(rules.VarUser)["did"].(string); did != "" {
		ctx["user"] = map[string]any{"type": "user", "id": did}
	}
	if dm := in.Var(rules.VarDelegation); len(dm) > 0 {
		ctx["delegation"] = dm
	}
	res := authzen.Entity{Type: "mcp_tool", ID: tool}
	if a, ok := in.Var(rules.VarTool)["annotations"]; ok {
		res.Properties = map[string]any{"annotations": a}
	}
	return &authzen.Request{Subject: sub, Action: authzen.Action{Name: mcp.MethodToolsCall}, Resource: res, Context: ctx}
}

// askPDP asks the route's PDP about a tools/call that dec allowed; in is
// the request's rule input, m the call.
func (tp *Policy) askPDP(ctx context.Context, in *rules.Input, m *mcp.Message, tool string, dec mcp.Decision) mcp.Decision {
	p := tp.pdp
	if p == nil || in == nil || !dec.Allowed || dec.Reason == reasonHandshakeTool {
		return dec
	}
	refused := mcp.Decision{Rule: dec.Rule, Reason: mcp.ReasonPolicyError, RuleName: pdpRuleName}
	raw, ok := mcp.ToolCallArguments(*m)
	if !ok {
		raw = json.RawMessage("unreadable")
	}
	// The PDP is sent the arguments' own text, once checked as the rules
	// check it (one object, not too deep, no member name repeated in any
	// case): decoded and re-encoded, a big integer would be rounded and a
	// lone surrogate replaced, so the PDP would decide on other values
	// than the upstream gets, and decoding a large call whole is dear.
	args, err := rules.ReadObject(raw)
	if err != nil {
		tp.logPDPError(tool, err)
		return refused
	}
	call := forTool(in, tool)
	d, _, err := p.client.Evaluate(ctx, pdpRequest(&call, tool, args))
	switch {
	case err != nil:
		tp.logPDPError(tool, err)
		return refused
	case !d.Allowed:
		msg := d.Reason
		if msg == "" {
			msg = p.client.Message()
		}
		return mcp.Decision{Rule: dec.Rule, Reason: mcp.ReasonRuleDenied, RuleName: pdpRuleName, Message: msg}
	}
	return dec
}

// logPDPError logs a call refused for want of a decision, at most once per
// pdpLogEvery. The error names what failed, never the request's values.
func (tp *Policy) logPDPError(tool string, err error) {
	p := tp.pdp
	now := time.Now().UnixNano()
	last := p.lastLog.Load()
	if now-last < int64(pdpLogEvery) || !p.lastLog.CompareAndSwap(last, now) {
		return
	}
	tp.parts.Logger.Warn("mcpi: the AuthZEN PDP gave no decision; the call is refused (policy_error). Check the PDP and authzen url/timeout. Logged at most every "+pdpLogEvery.String()+".",
		zap.String("tool", tp.toolLabel(tool)), zap.String("error", err.Error()))
}

// pdpDeniedText is the text of a call refused for want of a PDP decision.
func pdpErrorText(tool string) string {
	return fmt.Sprintf("Tool %q could not be authorized: the operator's policy decision point gave no decision for this call. The edge's log says why.", tool)
}
