// An entry's strings, detached from the credential they were decoded
// from, so that an entry keeps nothing else of it alive.

package cache

import (
	"slices"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// detachStrings copies the strings of d into one new string, each
// distinct value once (the issuer is often the user, the credential id the
// chain's), so that d keeps alive only what it says: strings decoded from
// a credential share the memory of the whole decoded claims. d's slices
// must be its own. It returns the length of the new string.
func detachStrings(d *vc.Delegation) int {
	each := func(f func(*string)) {
		f(&d.AgentDID)
		f(&d.UserDID)
		f(&d.Issuer)
		f(&d.RootIssuer)
		f(&d.RootAgentDID)
		f(&d.ID)
		f(&d.DelegationID)
		f(&d.CnfJKT)
		f(&d.Constraints)
		for _, l := range [...][]string{d.Scopes, d.Audience, d.Chain, d.ChainConstraints} {
			for i := range l {
				f(&l[i])
			}
		}
	}
	var room [16]string
	distinct := room[:0]
	n := 0
	each(func(s *string) {
		if !slices.Contains(distinct, *s) {
			distinct = append(distinct, *s)
			n += len(*s)
		}
	})
	var b strings.Builder
	b.Grow(n)
	for _, s := range distinct {
		b.WriteString(s)
	}
	all := b.String()
	each(func(s *string) {
		off := 0
		for _, u := range distinct {
			if u == *s {
				break
			}
			off += len(u)
		}
		*s = all[off : off+len(*s)]
	})
	return n
}
