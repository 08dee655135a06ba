package caddymodule

import (
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// placeholders sets the placeholders of a verified delegation:
// {http.auth.user.*}, which the access log picks up, and {mcpi.*}.
//
// A placeholder's value is an interface, and a string put in one is copied
// to the heap: five allocations per admitted request (the DIDs, the joined
// scopes, the delegation id, the issuer), for values that are the same on
// every request of one credential. So the boxed values are kept per
// credential (Delegation.Hash), checked against the delegation on use, in
// a set bounded like the edge's other per-request caches. One per handler:
// nothing outlives a config.
type placeholders struct {
	mu     sync.RWMutex
	byHash map[[32]byte]*identityValues
}

// maxPlaceholderSets bounds placeholders: the credentials are the clients'.
const maxPlaceholderSets = 256

// identityValues are one delegation's placeholder values, boxed once, with
// what they were made from.
type identityValues struct {
	agentDID, userDID, delegationID, issuer string
	scopes                                  []string

	agent, user, scopesJoined, id, iss any
}

func newIdentityValues(d *vc.Delegation) *identityValues {
	return &identityValues{
		agentDID: d.AgentDID, userDID: d.UserDID, delegationID: d.DelegationID, issuer: d.Issuer,
		scopes: slices.Clone(d.Scopes),
		agent:  d.AgentDID, user: d.UserDID, scopesJoined: strings.Join(d.Scopes, " "), id: d.DelegationID, iss: d.Issuer,
	}
}

// of reports whether v holds d's values.
func (v *identityValues) of(d *vc.Delegation) bool {
	return v.agentDID == d.AgentDID && v.userDID == d.UserDID && v.delegationID == d.DelegationID &&
		v.issuer == d.Issuer && slices.Equal(v.scopes, d.Scopes)
}

// values returns d's boxed values, from the set when d's credential was
// seen before with the same values.
func (p *placeholders) values(d *vc.Delegation) *identityValues {
	p.mu.RLock()
	v := p.byHash[d.Hash]
	p.mu.RUnlock()
	if v != nil && v.of(d) {
		return v
	}
	v = newIdentityValues(d)
	p.mu.Lock()
	if len(p.byHash) >= maxPlaceholderSets || p.byHash == nil {
		// Many credentials: start over rather than keep the first ones.
		p.byHash = make(map[[32]byte]*identityValues, maxPlaceholderSets)
	}
	p.byHash[d.Hash] = v
	p.mu.Unlock()
	return v
}

// set is the edge's Identity hook.
func (p *placeholders) set(r *http.Request, d *vc.Delegation) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	v := p.values(d)
	repl.Set("http.auth.user.id", v.agent)
	repl.Set("http.auth.user.agent_did", v.agent)
	repl.Set("http.auth.user.user_did", v.user)
	repl.Set("mcpi.agent_did", v.agent)
	repl.Set("mcpi.user_did", v.user)
	repl.Set("mcpi.scopes", v.scopesJoined)
	repl.Set("mcpi.delegation_id", v.id)
	repl.Set("mcpi.issuer", v.iss)
}
