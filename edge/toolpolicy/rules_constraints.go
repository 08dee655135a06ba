package toolpolicy

import (
	"github.com/mcpi-edge/caddy-mcpi/edge/rules"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// addChainConstraints sets the constraints a rule and the PDP read of a
// delegation: "constraints" is the chain's root credential's, the link
// the trusted issuer signed, so what the user granted; "chain" lists
// every link, root first, each with its id and its constraints.
//
// Verifying a chain narrows scopes, audience, validity and user, but
// nothing can narrow an issuer's own members (a maxAmount means what the
// issuer meant): an agent may re-delegate to itself with any constraints
// it likes. So the leaf's constraints are only the agent's word; a rule
// that wants every link's limits says delegation.chain.all(l, ...).
//
// Constraints are read as arguments are; a credential without them has
// an empty map, one the edge cannot read (nested too deep, a number out
// of range) none, so a rule reading it fails closed. A delegation whose
// links' constraints are not known (a chain of more than one, recorded
// without them) has none either.
func addChainConstraints(dm map[string]any, d *vc.Delegation) {
	texts := d.ChainConstraints
	if len(texts) == 0 && len(d.Chain) <= 1 {
		texts = []string{d.Constraints} // the credential is its own root
	}
	if len(d.Chain) > 0 && len(texts) != len(d.Chain) {
		return // no chain rather than an empty one, which all() would pass
	}
	chain := make([]any, len(texts))
	for i, t := range texts {
		link := map[string]any{}
		if i < len(d.Chain) {
			link["id"] = d.Chain[i]
		}
		if c, err := rules.ReadObject([]byte(t)); err == nil {
			link["constraints"] = c
			if i == 0 {
				dm["constraints"] = c
			}
		}
		chain[i] = link
	}
	dm["chain"] = chain
}
