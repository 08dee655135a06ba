package toolpolicy

import (
	"context"
	"slices"

	"github.com/mcpi-edge/caddy-mcpi/edge/authzen"
	"github.com/mcpi-edge/caddy-mcpi/edge/rules"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// The PDP at list time (docs/config/rules.md, "authzen"): a tools/list
// answer shows only the tools the PDP lets this caller use. The tools the
// scopes and rules leave listed are sent to the PDP together, one
// Access Evaluations request per answer when it offers the endpoint; a
// tool it gives no decision for, in time or at all, is hidden. A list
// filtered so is the caller's own: its cacheScope is private (as every
// filtered list's).

// pdpListRequest asks whether tool may be listed for the caller of in:
// the call's question, with the action tools/list and no arguments.
func (tp *Policy) pdpListRequest(in *rules.Input, tool string) *authzen.Request {
	call := forTool(in, tool)
	req := pdpRequest(&call, tool, nil)
	req.Action.Name = mcp.MethodToolsList
	delete(req.Context, "arguments")
	return req
}

// pdpListed decides, for the tools/list answers in body, which listed
// tools the PDP lets the caller see; nil when the PDP does not filter this
// request. A tool missing from the map is hidden.
func (c *responseCheck) pdpListed(body []byte) map[string]bool {
	tp := c.p
	if tp.pdp == nil || c.rulesIn() == nil {
		return nil
	}
	if !slices.Contains(mapValues(c.ids), mcp.MethodToolsList) {
		// A list in the answer to another request (a server routing
		// answers by a reused id) was not asked about: hidden.
		return map[string]bool{}
	}
	var names []string
	var reqs []*authzen.Request
	_ = mcp.EachListedTool(body, c.ids, func(tool string, _ mcp.ToolClass) {
		if slices.Contains(names, tool) || pdpSkips(tp, tool) ||
			!tp.toolAllowed(c.host, tool, c.d, c.presented) || !tp.listedByRules(c.ruleIn, tool) {
			return
		}
		names = append(names, tool)
		reqs = append(reqs, tp.pdpListRequest(c.ruleIn, tool))
	})
	ok := make(map[string]bool, len(names))
	if len(reqs) == 0 {
		return ok
	}
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	for k, res := range tp.pdp.client.EvaluateEach(ctx, reqs) {
		if res.Err != nil {
			tp.logPDPError(names[k], res.Err)
			continue
		}
		ok[names[k]] = res.Allowed
	}
	return ok
}

// pdpSkips: the PDP does not decide the handshake tools, on the call or in
// the list, unless a tool rule names them.
func pdpSkips(tp *Policy, tool string) bool {
	return slices.Contains(handshakeTools, tool) && (tp.pol == nil || !tp.pol.KnownTool(tool))
}

// pdpAllows reports whether the PDP lets tool be listed: the decisions of
// pdpListed (nil: the PDP does not filter).
func (c *responseCheck) pdpAllows(tool string) bool {
	return c.pdpOK == nil || pdpSkips(c.p, tool) || c.pdpOK[tool]
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
