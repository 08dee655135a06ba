package vc

import (
	"bytes"
	"context"
	"encoding/hex"
	"time"
)

// chainOf links the verified leaf to its ancestors in pool and returns the
// chain, root first, every link verified. The rules (docs/protocol/mcpi.md#chains):
//
//   - Linking: a credential's delegation.parentId names its parent's
//     delegation.id or credential id, and its issuer
//     must be the parent's subject: whoever delegates onwards must have
//     been delegated to. Two different ancestors with the parent's id, or a
//     cycle, are ErrChain. Ancestors that are not on the chain are ignored.
//   - Depth: at most v.maxDepth credentials, root and leaf included.
//   - Trust applies to the root: the top credential of the chain as given.
//   - A truncated chain: when the top credential names a parent that was
//     not given, it is accepted only if its own issuer passes the trust
//     policy, i.e. is trusted directly (with AnyIssuer every issuer is,
//     which keeps the single-credential behaviour of earlier versions:
//     trusting any issuer, nothing is gained by cutting a chain). Otherwise
//     it is ErrChainIncomplete: the presenter must send the ancestors.
//   - Fetching: with WithChainFetch, a parent that was not given is fetched
//     from the https URL its child names, unless the child's issuer is
//     trusted directly (chainfetch.go); it is then linked and verified like
//     every other ancestor.
//   - Every ancestor is verified like the leaf (signature by a key in its
//     issuer's assertionMethod, type, validity window now, audience),
//     after the trust check, so chains that would be refused anyway cause
//     no DID resolution.
//   - Between each child and its parent: scopes only narrow (child ⊆
//     parent); the audience never widens (a parent that names an audience
//     binds its child to a subset of it); validity windows nest (the
//     child's start and end within the parent's, with the clock skew
//     tolerated, a child without an end under a parent with one does not
//     nest); and the user never changes (userOf).
//
// The chain is appended to links (empty; the caller's room for it).
func (v *Verifier) chainOf(ctx context.Context, leaf *parsed, pool []*parsed, c *checks, links []*parsed) ([]*parsed, error) {
	links = append(links, leaf) // leaf first while linking
	var fetched map[string]bool
	for cur := leaf; cur.parentID != ""; {
		parent, err := findParent(pool, cur.parentID)
		if err != nil {
			return nil, err
		}
		if parent == nil && v.fetch != nil {
			if fetched == nil {
				fetched = map[string]bool{}
			}
			if parent, err = v.fetchParent(ctx, cur, len(links), fetched); err != nil {
				return nil, err
			}
		}
		if parent == nil {
			break
		}
		for _, l := range links {
			if l == parent || l.hash == parent.hash {
				return nil, fail(ErrChain, "credentials form a cycle")
			}
		}
		if cur.d.Issuer != parent.d.AgentDID {
			return nil, fail(ErrChain, "issuer is not its parent's subject")
		}
		links = append(links, parent)
		if len(links) > v.maxDepth {
			break
		}
		cur = parent
	}
	if len(links) > v.maxDepth {
		return nil, fail(ErrChain, "chain deeper than allowed")
	}

	root := links[len(links)-1]
	if !v.trusts(root.d.Issuer) {
		if root.parentID != "" {
			return nil, fail(ErrChainIncomplete, "parent credential not given and the issuer is not trusted directly")
		}
		if len(links) > 1 {
			return nil, fail(ErrUntrustedIssuer, "root issuer")
		}
		return nil, fail(ErrUntrustedIssuer, "")
	}
	for _, a := range links[1:] {
		if err := v.verifyCredential(ctx, a); err != nil {
			return nil, within(err, "ancestor credential")
		}
		if err := checkAudience(a.audiences, c); err != nil {
			return nil, within(err, "ancestor credential")
		}
	}
	for i := 0; i+1 < len(links); i++ {
		if err := v.checkLink(links[i], links[i+1]); err != nil {
			return nil, err
		}
	}
	// Root first from here on.
	for i, j := 0, len(links)-1; i < j; i, j = i+1, j-1 {
		links[i], links[j] = links[j], links[i]
	}
	user := userOf(links)
	for _, l := range links[1:] {
		if l.userDID != "" && l.userDID != user {
			return nil, fail(ErrChain, "delegation.userDid changes along the chain")
		}
	}
	return links, nil
}

// userOf is the user a chain (root first) acts for: the root's
// delegation.userDid, else the root issuer (a root issuer may act for a
// user it names). Later credentials may repeat the user but not change
// it (chainOf): an agent cannot re-delegate on behalf of someone else.
func userOf(chain []*parsed) string {
	if u := chain[0].userDID; u != "" {
		return u
	}
	return chain[0].d.Issuer
}

// names reports whether a parentId of id names p: its delegation id
// (KYA-OS parentId is the parent delegation record's id) or its credential
// id.
func (p *parsed) names(id string) bool {
	return id != "" && (p.d.DelegationID == id || p.d.ID == id)
}

// findParent returns the credential of pool that id names, nil if there is
// none. Identical copies count once.
func findParent(pool []*parsed, id string) (*parsed, error) {
	var found *parsed
	for _, p := range pool {
		if !p.names(id) {
			continue
		}
		if found != nil && found.hash != p.hash {
			return nil, fail(ErrChain, "two ancestors share the parent's id")
		}
		found = p
	}
	return found, nil
}

// checkLink applies the attenuation rules between a child and its parent.
func (v *Verifier) checkLink(child, parent *parsed) error {
	for _, s := range child.d.Scopes {
		if !parent.d.HasScopes(s) {
			return fail(ErrChain, "scopes widen")
		}
	}
	if pa, restricted := audienceSet(parent.audiences); restricted {
		ca, childRestricted := audienceSet(child.audiences)
		if !childRestricted {
			return fail(ErrChain, "audience widens")
		}
		for _, a := range ca {
			if !stringList(pa).has(a) {
				return fail(ErrChain, "audience widens")
			}
		}
	}
	if !v.nests(child, parent) {
		return fail(ErrChain, "validity window not within the parent's")
	}
	return nil
}

// audienceSet is the audience a credential is bound to: every place that
// names one must be met, so it is their intersection. restricted is false
// when no place names one (any audience).
func audienceSet(places [][]string) (set []string, restricted bool) {
	if len(places) == 0 {
		return nil, false
	}
	for _, a := range places[0] {
		in := true
		for _, other := range places[1:] {
			if !stringList(other).has(a) {
				in = false
				break
			}
		}
		if in {
			set = appendUnique(set, a)
		}
	}
	return set, true
}

// nests reports whether the child's validity window lies within the
// parent's, give or take the clock skew (the two may be signed on
// different machines). The start of a credential without a not-before
// bound is its issuance time.
func (v *Verifier) nests(child, parent *parsed) bool {
	start := func(p *parsed) time.Time {
		if !p.d.NotBefore.IsZero() {
			return p.d.NotBefore
		}
		return p.d.IssuedAt
	}
	if ps := start(parent); !ps.IsZero() {
		cs := start(child)
		if cs.IsZero() || cs.Add(v.skew).Before(ps) {
			return false
		}
	}
	if pe := parent.d.ExpiresAt; !pe.IsZero() {
		ce := child.d.ExpiresAt
		if ce.IsZero() || ce.After(pe.Add(v.skew)) {
			return false
		}
	}
	return true
}

// delegationOf is the delegation a verified chain (root first) grants: the
// leaf's, with the user and the validity window of the whole chain and
// each link's constraints. Its
// slices are its own (the leaf's point into the parsed credential), in
// one allocation with it when they are short.
func delegationOf(chain []*parsed) *Delegation {
	leaf := &chain[len(chain)-1].d
	d, buf := newDelegation(len(leaf.Scopes) + len(leaf.Audience) + 2*len(chain))
	*d = *leaf
	d.Scopes, buf = carve(buf, leaf.Scopes)
	d.Audience, buf = carve(buf, leaf.Audience)
	d.UserDID = userOf(chain)
	d.RootIssuer = chain[0].d.Issuer
	d.RootAgentDID = chain[0].d.AgentDID
	start := len(buf)
	for _, l := range chain {
		d.NotBefore = latest(d.NotBefore, l.d.NotBefore)
		d.ExpiresAt = earliest(d.ExpiresAt, l.d.ExpiresAt, l.lifetimeEnd)
		id := l.d.ID
		if id == "" {
			id = "sha256:" + hex.EncodeToString(l.hash[:])
		}
		buf = append(buf, id)
	}
	d.Chain = buf[start:len(buf):len(buf)]
	start = len(buf)
	for _, l := range chain {
		buf = append(buf, l.d.Constraints)
	}
	d.ChainConstraints = buf[start:len(buf):len(buf)]
	return d
}

// onChain counts the credentials of given that are links of chain.
func onChain(chain, given []*parsed) int {
	n := 0
	for _, g := range given {
		for _, l := range chain {
			if l == g {
				n++
				break
			}
		}
	}
	return n
}

// copiesOf counts the ancestors that are raw itself: a client that sends
// the whole chain, leaf included, as its ancestors.
func copiesOf(raw []byte, ancestors [][]byte) int {
	n := 0
	for _, a := range ancestors {
		if bytes.Equal(trimSpace(a), raw) {
			n++
		}
	}
	return n
}
