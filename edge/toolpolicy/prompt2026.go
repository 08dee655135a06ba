package toolpolicy

import (
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The consent prompt of the 2026 era: a client that declared URL-mode
// elicitation in its per-request capabilities gets an input-required result
// with a URL-mode elicitation/create to the consent link and a requestState
// sealed by the edge (requeststate.go). Its retry is a new request: every
// check runs again, and the edge's requestState, when present, must be
// sound, unexpired and issued to this agent for this tool.

// consentInput is the input-required consent prompt for the denied call m,
// when the request is of the 2026 era, the client can show a URL, and a
// consent URL is configured; ok is false otherwise.
func (p *Policy) consentInput(era mcp.Era, m mcp.Message, n mcp.NeedsAuthorization) ([]byte, bool) {
	if era < mcp.Era2026 || n.ConsentURL == "" || p.states == nil || !mcp.DeclaresURLElicitation(m.Params) {
		return nil, false
	}
	return mcp.NeedsAuthorizationInput(m.ID, n, p.states.sealResume(n.AgentDID, n.Tool, n.ResumeToken))
}

// checkRequestState checks the requestState of a 2026 tools/call m of tool
// by the caller holding d (nil: anonymous), and returns the resume token of
// the prompt it answers. States the edge did not issue (no edge prefix)
// belong to the upstream and are not its concern.
func (p *Policy) checkRequestState(r *http.Request, m mcp.Message, tool string, d *vc.Delegation) (string, error) {
	if mcp.HeaderEra(r.Header) < mcp.Era2026 || p.states == nil {
		return "", nil
	}
	state, ok, err := mcp.RequestStateOf(m.Params)
	if err != nil || !ok || !isEdgeState(state) {
		return "", err
	}
	agent := ""
	if d != nil {
		agent = d.AgentDID
	}
	return p.states.openResume(state, agent, tool)
}

// requestStateRefusal answers a call whose requestState failed: a JSON-RPC
// invalid-params error saying why (HTTP 200, as other JSON-RPC errors of
// the policy), and nothing forwarded.
func requestStateRefusal(m mcp.Message, err error, adm observe.Decision) *refusal.Refusal {
	tool, _ := mcp.ToolCallName(m)
	rf := refusal.JSONRPC(http.StatusOK, "bad_request_state", m.ID, mcp.CodeInvalidParams, "mcpi: "+err.Error(), err)
	rf.Log = "requestState refused"
	rf.Decision = &observe.Decision{Outcome: "rejected", Reason: "bad_request_state", Status: http.StatusOK,
		Delegation: adm.Delegation, Carrier: adm.Carrier, Tool: tool}
	return rf
}
