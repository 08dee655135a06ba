package toolpolicy

import (
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/rules"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// ruleVars builds what the rules read of a request, each variable on the
// first read of it and once per request: a rule over the arguments and the
// delegation's scopes costs neither an agent map nor a reputation lookup,
// and the tools of one list or batch share the request's maps.
type ruleVars struct {
	in        rules.Input
	p         *Policy
	r         *http.Request
	method    string
	d         *vc.Delegation
	adm       observe.Decision
	presented bool // known holder-bound; else holderBound decides, when read

	host                             string
	agent, user, delegation, request map[string]any
	hostKnown                        bool
}

// ruleInput is what the rules read of a request, but for the tool and its
// arguments; nothing is built until a rule or the PDP reads it. presented
// says the delegation is known to be holder-bound.
func (p *Policy) ruleInput(r *http.Request, method string, d *vc.Delegation, adm observe.Decision, presented bool) *rules.Input {
	v := &ruleVars{p: p, r: r, method: method, d: d, adm: adm, presented: presented}
	v.in = rules.Input{Vars: v, Now: time.Now()}
	return &v.in
}

// ruleHost is the host of the request in, as rules read it.
func ruleHost(in *rules.Input) string {
	if v, ok := in.Vars.(*ruleVars); ok {
		return v.hostName()
	}
	h, _ := in.Request["host"].(string)
	return h
}

func (v *ruleVars) hostName() string {
	if !v.hostKnown {
		v.host, v.hostKnown = v.p.parts.Site.Host(v.r), true
	}
	return v.host
}

// Var builds a variable of in (rules.Vars). The request's variables are
// built once whatever copy of in asks; the tool is in's own.
func (v *ruleVars) Var(in *rules.Input, name string) map[string]any {
	switch name {
	case rules.VarTool:
		return v.tool(in.ToolName)
	case rules.VarRequest:
		if v.request == nil {
			v.request = map[string]any{"method": v.method, "http_method": v.r.Method, "era": eraName(mcp.HeaderEra(v.r.Header)),
				"host": v.hostName(), "path": v.r.URL.Path}
		}
		return v.request
	}
	d := v.d
	if d == nil {
		return nil
	}
	switch name {
	case rules.VarAgent:
		if v.agent == nil {
			v.agent = map[string]any{"did": d.AgentDID}
			if score, ok := v.p.parts.Identity.Reputation(v.r.Context(), d.AgentDID); ok {
				v.agent["reputation"] = score
			}
		}
		return v.agent
	case rules.VarUser:
		if v.user == nil {
			v.user = map[string]any{"did": d.UserDID}
		}
		return v.user
	case rules.VarDelegation:
		if v.delegation == nil {
			v.delegation = v.delegationVar()
		}
		return v.delegation
	}
	return nil
}

// delegationVarMembers is the most members the delegation variable has:
// eleven always, expires_at, issued_at, constraints and chain.
const delegationVarMembers = 15

func (v *ruleVars) delegationVar() map[string]any {
	d := v.d
	presented := v.presented || v.p.holderBound(v.r, d, v.adm)
	// Sized for every member it may get, the times and the chain's
	// included: growing it costs allocations on every call a rule reads.
	dm := make(map[string]any, delegationVarMembers)
	dm["id"], dm["credential_id"], dm["issuer"], dm["root_issuer"] = d.DelegationID, d.ID, d.Issuer, d.RootIssuer
	dm["scopes"], dm["audience"], dm["format"] = d.Scopes, d.Audience, string(d.Format)
	dm["chain_depth"], dm["carrier"] = int64(max(len(d.Chain), 1)), v.adm.Carrier
	dm["presented"], dm["dpop"] = presented, d.CnfJKT != ""
	if !d.ExpiresAt.IsZero() {
		dm["expires_at"] = d.ExpiresAt
	}
	if !d.IssuedAt.IsZero() {
		dm["issued_at"] = d.IssuedAt
	}
	addChainConstraints(dm, d)
	return dm
}

// tool is the tool variable of a call of tool: its annotations are those
// the upstream's last tools/list answer at this host gave.
func (v *ruleVars) tool(tool string) map[string]any {
	b := map[string]any{"name": tool}
	if h := v.p.annotations.hints(v.hostName(), tool); h != nil {
		b["annotations"] = h
	}
	return b
}

// forTool is in as a call of tool reads it: the request's variables, this
// tool, and no arguments yet.
func forTool(in *rules.Input, tool string) rules.Input {
	call := *in
	call.Tool, call.ToolName, call.Arguments = nil, tool, nil
	return call
}
