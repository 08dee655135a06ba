package identity

import (
	"slices"
	"strings"
	"sync"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Boxed is one delegation's identity as interface values. A host that
// hands the identity to interface-typed slots on every admitted request
// (Caddy's placeholders) would otherwise copy each string to the heap each
// time: five allocations per request (the DIDs, the joined scopes, the
// delegation id, the issuer) for values that are the same on every request
// of one credential.
type Boxed struct {
	// The delegation's agent and user DIDs, its scopes joined by spaces,
	// its id and its issuer, each a string in an interface.
	AgentDID, UserDID, Scopes, DelegationID, Issuer any

	// What they were made from.
	agentDID, userDID, delegationID, issuer string
	scopes                                  []string
}

func newBoxed(d *vc.Delegation) *Boxed {
	return &Boxed{
		agentDID: d.AgentDID, userDID: d.UserDID, delegationID: d.DelegationID, issuer: d.Issuer,
		scopes:   slices.Clone(d.Scopes),
		AgentDID: d.AgentDID, UserDID: d.UserDID, Scopes: strings.Join(d.Scopes, " "), DelegationID: d.DelegationID, Issuer: d.Issuer,
	}
}

// of reports whether b holds d's values.
func (b *Boxed) of(d *vc.Delegation) bool {
	return b.agentDID == d.AgentDID && b.userDID == d.UserDID && b.delegationID == d.DelegationID &&
		b.issuer == d.Issuer && slices.Equal(b.scopes, d.Scopes)
}

// BoxCache keeps the Boxed values per credential (Delegation.Hash),
// checked against the delegation on use, in a set bounded like the edge's
// other per-request caches: the credentials are the clients'. The zero
// value is ready; it is safe for concurrent use.
type BoxCache struct {
	mu     sync.RWMutex
	byHash map[[32]byte]*Boxed
}

// maxBoxed bounds a BoxCache.
const maxBoxed = 256

// Of returns d's boxed values, from the cache when d's credential was seen
// before with the same values.
func (c *BoxCache) Of(d *vc.Delegation) *Boxed {
	c.mu.RLock()
	b := c.byHash[d.Hash]
	c.mu.RUnlock()
	if b != nil && b.of(d) {
		return b
	}
	b = newBoxed(d)
	c.mu.Lock()
	if len(c.byHash) >= maxBoxed || c.byHash == nil {
		// Many credentials: start over rather than keep the first ones.
		c.byHash = make(map[[32]byte]*Boxed, maxBoxed)
	}
	c.byHash[d.Hash] = b
	c.mu.Unlock()
	return b
}
