package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// placeholders sets the placeholders of a verified delegation:
// {http.auth.user.*}, which the access log picks up, and {mcpi.*}. A
// placeholder's value is an interface, so the values are boxed once per
// credential (identity.BoxCache). One per handler: nothing outlives a
// config.
type placeholders struct{ boxed identity.BoxCache }

// set is the edge's Identity hook.
func (p *placeholders) set(r *http.Request, d *vc.Delegation) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	v := p.boxed.Of(d)
	repl.Set("http.auth.user.id", v.AgentDID)
	repl.Set("http.auth.user.agent_did", v.AgentDID)
	repl.Set("http.auth.user.user_did", v.UserDID)
	repl.Set("mcpi.agent_did", v.AgentDID)
	repl.Set("mcpi.user_did", v.UserDID)
	repl.Set("mcpi.scopes", v.Scopes)
	repl.Set("mcpi.delegation_id", v.DelegationID)
	repl.Set("mcpi.issuer", v.Issuer)
}
