// Copies of a Delegation for the result cache: one backing array for its
// strings, so that an entry keeps nothing else of the credential alive.

package vc

import "strings"

// cloneDelegation returns a copy of src whose slices are its own, in one
// backing array; each is capped so that appending to one reallocates
// rather than writing over the next. A delegation with a few scopes,
// audiences and chain links (the usual) is copied in one allocation.
func cloneDelegation(src *Delegation) *Delegation {
	d, buf := newDelegation(len(src.Scopes) + len(src.Audience) + len(src.Chain))
	copyDelegation(d, src, buf)
	return d
}

// newDelegation allocates a Delegation and room for n strings of its
// slices, in one allocation when n is small.
func newDelegation(n int) (*Delegation, []string) {
	if n <= len(delegationBox{}.strs) {
		b := new(delegationBox)
		return &b.d, b.strs[:0:n]
	}
	return new(Delegation), make([]string, 0, n)
}

// delegationBox holds a Delegation and the strings of its slices.
type delegationBox struct {
	d    Delegation
	strs [6]string
}

// copyDelegation sets *d to a copy of *src with its slices in buf, which
// has room for them all.
func copyDelegation(d, src *Delegation, buf []string) {
	*d = *src
	d.Scopes, buf = carve(buf, src.Scopes)
	d.Audience, buf = carve(buf, src.Audience)
	d.Chain, _ = carve(buf, src.Chain)
}

// carve appends src to buf and returns the appended part (nil for a nil
// src, so that JSON output is unchanged) and buf.
func carve(buf, src []string) ([]string, []string) {
	if src == nil {
		return nil, buf
	}
	start := len(buf)
	buf = append(buf, src...)
	return buf[start:len(buf):len(buf)], buf
}

// detachStrings copies the strings of d into one new string, each
// distinct value once (the issuer is often the user, the credential id the
// chain's), so that d keeps alive only what it says: strings decoded from
// a credential share the memory of the whole decoded claims. d's slices
// must be its own. It returns the length of the new string.
func detachStrings(d *Delegation) int {
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
		for _, l := range [...][]string{d.Scopes, d.Audience, d.Chain} {
			for i := range l {
				f(&l[i])
			}
		}
	}
	var room [16]string
	distinct := room[:0]
	n := 0
	each(func(s *string) {
		if !stringList(distinct).has(*s) {
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
