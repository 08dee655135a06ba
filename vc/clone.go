// Copies of a Delegation whose slices are their own.

package vc

// Clone returns a copy of d whose slices are its own, in one backing
// array; each is capped so that appending to one reallocates rather than
// writing over the next. A delegation with a few scopes, audiences and
// chain links (the usual) is copied in one allocation.
func (d *Delegation) Clone() *Delegation {
	c, buf := newDelegation(d.Strings())
	d.CopyTo(c, buf)
	return c
}

// Strings is how many strings d's slices hold: the room CopyTo needs.
func (d *Delegation) Strings() int {
	return len(d.Scopes) + len(d.Audience) + len(d.Chain) + len(d.ChainConstraints)
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

// CopyTo sets *dst to a copy of d with its slices in buf, which has room
// for d.Strings() more: a holder of many copies can keep each with its
// strings in one allocation.
func (d *Delegation) CopyTo(dst *Delegation, buf []string) {
	*dst = *d
	dst.Scopes, buf = carve(buf, d.Scopes)
	dst.Audience, buf = carve(buf, d.Audience)
	dst.Chain, buf = carve(buf, d.Chain)
	dst.ChainConstraints, _ = carve(buf, d.ChainConstraints)
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
