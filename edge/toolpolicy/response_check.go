package toolpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/edge/rules"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// responseCheck is what the responses to one request are checked against:
// the tool filter and the handshake-action and URL guards, applied by
// rewrite to each complete JSON value that the responseFilter
// (response_filter.go) hands it.
type responseCheck struct {
	p         *Policy
	host      string         // site.Host of the request
	d         *vc.Delegation // nil: anonymous
	presented bool
	// ids maps IDKey(id) to the method of each request of the request
	// body; nil for a resumed stream, whose events answer requests the
	// edge did not see here, and when nothing is filtered and every
	// request is a tools/call: either way every result is checked.
	ids map[string]string
	// msgs are the messages of the request body (nil for a resumed
	// stream), for the failure answer and the log label.
	msgs  []mcp.Message
	batch bool

	filter bool
	// sniff: the request holds no tools/list, and filter only guards
	// against a server that puts another request's tools/list answer here
	// (answers routed by a reused id); what cannot be read passes.
	sniff   bool
	actions mcp.ActionMode
	era     mcp.Era // of the request: shapes the results the edge writes
	opts    mcp.ActionOptions
	tool    string // log label of the called tool(s); "" until toolLabel
	// lists: the request holds a tools/list, whose answers teach the
	// x-mcp-header bindings of the listed tools (paramheaders.go).
	lists bool
	// ruleIn is what operator rules read of the request; nil without rules.
	// lazyRuleIn, when set, builds it on first use (ruleInput): most
	// answers hold no tool list, and the input costs a few dozen
	// allocations.
	ruleIn     *rules.Input
	lazyRuleIn func() *rules.Input
	// ctx is the request's, for the PDP; pdpOK is the PDP's decisions on
	// the tools of the list being filtered (policy_authzen_list.go).
	ctx   context.Context
	pdpOK map[string]bool

	// rw is the filter wrap returns: allocated with the check, since every
	// check wraps one response.
	rw responseFilter
}

func (p *Policy) newResponseCheck(r *http.Request, d *vc.Delegation, msgs []mcp.Message, batch, filter, actions bool) *responseCheck {
	c := &responseCheck{p: p, host: p.parts.Site.Host(r), d: d, msgs: msgs, batch: batch, filter: filter, era: mcp.HeaderEra(r.Header), ctx: r.Context()}
	if actions {
		c.actions = p.actions
		c.opts = mcp.ActionOptions{ToolEndpointHost: r.Host, AllowedHosts: p.actionHosts, Era: c.era}
		if d != nil {
			c.opts.UserDID = d.UserDID
		}
	}
	if msgs != nil && (filter || !onlyToolCalls(msgs)) {
		c.ids = mcp.RequestMethods(msgs)
	}
	for _, m := range msgs {
		// Only a list asked for in the 2026 era by the body as well as the
		// header teaches: one asked with the header alone may be answered
		// as to an older client, without x-mcp-header.
		c.lists = c.lists || (m.Method == mcp.MethodToolsList && c.era == mcp.Era2026 && mcp.CarriesMetaVersion(m))
	}
	return c
}

// onlyToolCalls reports whether every request in msgs is a tools/call: then
// CheckResponseBody checks every result, with the request ids or without.
func onlyToolCalls(msgs []mcp.Message) bool {
	for _, m := range msgs {
		if mcp.IsRequest(m) && m.Method != mcp.MethodToolsCall {
			return false
		}
	}
	return true
}

// toolLabel is the log label of the tool(s) the request calls: the tool,
// "batch" for several calls, "none" for none. Only logs need it, so it is
// worked out on first use.
func (c *responseCheck) toolLabel() string {
	if c.tool != "" {
		return c.tool
	}
	c.tool = "none"
	calls := 0
	for _, m := range c.msgs {
		if name, ok := mcp.ToolCallName(m); ok {
			if calls++; calls == 1 {
				c.tool = c.p.toolLabel(name)
			} else {
				c.tool = "batch"
			}
		}
	}
	return c.tool
}

// wrap returns w wrapped to apply c to the response of r. It is called once
// per check.
func (c *responseCheck) wrap(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	// A compressed answer cannot be read. Without Accept-Encoding neither
	// an encode handler after this one nor the upstream compresses (the
	// proxy transport negotiates and decodes its own compression).
	r.Header.Del("Accept-Encoding")
	c.rw = responseFilter{ResponseWriter: w, check: c, max: int(c.p.maxResponseSize)}
	return &c.rw
}

// mayPassUnchecked: nothing is filtered and actions are only observed, so a
// response that cannot be checked may still go through.
func (c *responseCheck) mayPassUnchecked() bool {
	return (!c.filter || c.sniff) && c.actions != mcp.ActionsEnforce
}

func (c *responseCheck) allow(tool string) bool {
	c.p.listed.add(tool)
	return c.p.toolAllowed(c.host, tool, c.d, c.presented) && c.p.listedByRules(c.rulesIn(), tool) && c.pdpAllows(tool)
}

// rulesIn is c.ruleIn, built on first use.
func (c *responseCheck) rulesIn() *rules.Input {
	if c.lazyRuleIn != nil {
		c.ruleIn, c.lazyRuleIn = c.lazyRuleIn(), nil
	}
	return c.ruleIn
}

// rewrite applies c to one JSON-RPC body (an application/json answer, or the
// data of one SSE event).
func (c *responseCheck) rewrite(data []byte) ([]byte, error) {
	if c.lists {
		c.p.params.learn(c.era, data, c.ids)
	}
	out := data
	read := false // ParseMessages accepted out: the action check need not again
	if c.filter {
		c.pdpOK = c.pdpListed(out)
		filtered, parsed, err := mcp.FilterResponseBodyRead(c.era, out, c.ids, c.allow)
		switch {
		case err == nil:
			out, read = filtered, parsed
		case !c.sniff, errors.Is(err, mcp.ErrAmbiguous):
			// A tool list spelt twice or in another letter case was
			// read, and is a smuggled list, not an unreadable answer.
			return nil, err
		default:
			c.logUnchecked(err)
		}
	}
	if c.actions == mcp.ActionsOff {
		return out, nil
	}
	check := mcp.CheckResponseBody
	if read {
		check = mcp.CheckReadResponseBody
	}
	checked, issues, err := check(out, c.ids, c.opts, c.actions)
	if err != nil {
		if c.actions == mcp.ActionsEnforce {
			return nil, err
		}
		c.logUnchecked(err)
		return out, nil
	}
	for _, is := range issues {
		msg := "handshake action replaced by a tool error"
		if c.actions == mcp.ActionsObserve {
			msg = "invalid handshake action (observe only)"
		}
		if ce := c.p.parts.Logger.Check(zapcore.WarnLevel, msg); ce != nil {
			ce.Write(zap.String("tool", c.toolLabel()), zap.String("action", is.Action), zap.String("issue", is.Code),
				zap.String("field", is.Field), zap.String("detail", is.Detail))
		}
	}
	return checked, nil
}

// failBody answers every request of the request body with a JSON-RPC error,
// for a response that was withheld because of err. One withheld for its
// size names the limit and the setting that raises it.
func (c *responseCheck) failBody(err error) []byte {
	msg := "mcpi: the upstream response could not be checked and was withheld"
	if errors.Is(err, errResponseOversize) || errors.Is(err, mcp.ErrEventTooLarge) {
		msg = fmt.Sprintf("mcpi: the upstream response is larger than max_response_size (%d bytes), so it could not be checked and was withheld; raise max_response_size on this route", c.p.maxResponseSize)
	}
	var ids []json.RawMessage
	for _, m := range c.msgs {
		if mcp.IsRequest(m) {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return mcp.ErrorResponse(nil, mcp.CodeInternalError, msg)
	}
	if !c.batch {
		return mcp.ErrorResponse(ids[0], mcp.CodeInternalError, msg)
	}
	out := make([][]byte, len(ids))
	for i, id := range ids {
		out[i] = mcp.ErrorResponse(id, mcp.CodeInternalError, msg)
	}
	return joinBatch(out)
}

// logWithheld logs a response that was not forwarded: the operator's
// upstream answered something the edge could not check.
func (c *responseCheck) logWithheld(err error) {
	if ce := c.p.parts.Logger.Check(zapcore.WarnLevel, "upstream response withheld: it could not be checked"); ce != nil {
		ce.Write(zap.String("tool", c.toolLabel()), zap.Error(err))
	}
}

func (c *responseCheck) logUnchecked(err error) {
	if ce := c.p.parts.Logger.Check(zapcore.DebugLevel, "upstream response passed unchecked"); ce != nil {
		ce.Write(zap.String("tool", c.toolLabel()), zap.Error(err))
	}
}
