package toolpolicy

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// denialDecision is the request's one decision, the denial of its first
// denied call, in place of its admission adm (whose delegation and carrier
// it keeps).
func denialDecision(msgs []mcp.Message, decisions []mcp.Decision, adm observe.Decision, status int) *observe.Decision {
	for i, m := range msgs {
		if m.Method == mcp.MethodToolsCall && !decisions[i].Allowed {
			name, _ := mcp.ToolCallName(m)
			return &observe.Decision{Outcome: "denied", Reason: decisions[i].Reason, Status: status,
				Delegation: adm.Delegation, Carrier: adm.Carrier, Tool: name, Rule: decisions[i].RuleName}
		}
	}
	return nil
}

// denied is the answer to a request holding a denied tools/call, given at
// the edge with HTTP 200: a tool error result for every denied call, a JSON-RPC
// error for every other request of a batch (none of it was forwarded).
// Notifications get no answer; with nothing to answer it is 202 Accepted.
func (p *Policy) denied(w http.ResponseWriter, r *http.Request, msgs []mcp.Message, batch bool, decisions []mcp.Decision, d *vc.Delegation, adm observe.Decision) *refusal.Refusal {
	// A KYA-OS agent that asked for the draft-kya-http-02 challenge gets it
	// (kyahttp.go), whoever issued its delegation.
	if rf := p.kyaHTTP(r, msgs, batch, decisions, d, adm); rf != nil {
		return rf
	}
	if scope, ok := p.stepUpScope(msgs, batch, decisions, d); ok {
		rf := stepUp(scope)
		rf.Decision = denialDecision(msgs, decisions, adm, http.StatusForbidden)
		return rf
	}
	rf := &refusal.Refusal{Status: http.StatusOK, Reason: "denied", Decision: denialDecision(msgs, decisions, adm, http.StatusOK)}
	era := mcp.HeaderEra(r.Header)
	var out [][]byte
	for i, m := range msgs {
		if !mcp.IsRequest(m) {
			continue
		}
		if m.Method == mcp.MethodToolsCall && !decisions[i].Allowed {
			name, _ := mcp.ToolCallName(m)
			if b, ok := p.parts.Proofs.SignedChallenge(w, r, batch, m, name, decisions[i], d); ok {
				out = append(out, b)
				continue
			}
			b := p.deniedResult(r, era, m, name, decisions[i], d)
			if sb, ok := p.parts.Proofs.SignedDenial(w, r, batch, m, b, decisions[i].Reason, d); ok {
				b = sb
			}
			out = append(out, b)
			continue
		}
		out = append(out, mcp.ErrorResponse(m.ID, codeBatchRefused,
			"not forwarded: the batch holds a tools/call this agent may not make; send this request on its own"))
	}
	switch {
	case len(out) == 0:
		rf.Status = http.StatusAccepted
	case !batch:
		rf.Body = out[0]
	default:
		rf.Body = joinBatch(out)
	}
	return rf
}

func joinBatch(msgs [][]byte) []byte {
	n := 2
	for _, m := range msgs {
		n += len(m) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
	}
	return append(b, ']')
}

// deniedResult is the tool result answering a denied call of tool.
// A 2026 client that declared URL-mode elicitation gets the consent prompt
// as an input-required result (prompt2026.go); every other one the tool
// result it has always got.
func (p *Policy) deniedResult(r *http.Request, era mcp.Era, m mcp.Message, tool string, dec mcp.Decision, d *vc.Delegation) []byte {
	id := m.ID
	switch dec.Reason {
	case mcp.ReasonInsufficientScope, mcp.ReasonAnonymous:
		n := mcp.NeedsAuthorization{Tool: tool, Missing: dec.Missing, Era: era, ResumeToken: resumeToken()}
		if d != nil {
			n.AgentDID = d.AgentDID
		}
		if n.ConsentURL = p.parts.Consent.URL(r, tool, dec, d, n.ResumeToken); n.ConsentURL == "" {
			n.ResumeToken = ""
		}
		if b, ok := p.consentInput(era, m, n); ok {
			return b
		}
		return mcp.NeedsAuthorizationResult(id, n)
	case mcp.ReasonRuleDenied, mcp.ReasonPolicyError:
		return ruleDeniedResult(era, id, tool, dec)
	case mcp.ReasonPresentationRequired:
		return mcp.ToolErrorResultFor(era, id, fmt.Sprintf("Tool %q requires the delegation to be presented in a Verifiable Presentation signed by the agent, or over an MCP-I handshake session.", tool),
			map[string]any{"error": "presentation_required", "toolName": tool})
	default:
		return mcp.ToolErrorResultFor(era, id, fmt.Sprintf("Tool %q is not available to this agent.", tool),
			map[string]any{"error": "tool_not_allowed", "toolName": tool})
	}
}

// resumeToken is an opaque, random 128-bit value the consent service echoes
// back so that the agent can resume the refused call.
func resumeToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (p *Policy) logDecision(tool string, d *vc.Delegation, dec mcp.Decision) {
	outcome := "denied"
	if dec.Allowed {
		outcome = "allowed"
	}
	p.parts.Recorder.ToolDecision(p.toolLabel(tool), outcome)
	c := p.parts.Logger.Check(zapcore.DebugLevel, "tool call decided")
	if c == nil {
		return
	}
	fields := []zap.Field{zap.String("tool", p.toolLabel(tool)), zap.Bool("allowed", dec.Allowed), zap.String("reason", dec.Reason)}
	if len(dec.Missing) > 0 {
		fields = append(fields, zap.Strings("missing_scopes", dec.Missing))
	}
	if d != nil {
		fields = append(fields, zap.String("agent_did", d.AgentDID))
	}
	c.Write(fields...)
}
