// The validity rules of a credential: its window, its lifetime, and the
// dates that nest in a chain.

package vc

import "time"

// checkWindow checks the lifetime rules and every date bound with the
// configured skew.
func (v *Verifier) checkWindow(p *parsed) error {
	if err := v.checkLifetime(p); err != nil {
		return err
	}
	now := v.now()
	d := &p.d
	if !d.ExpiresAt.IsZero() && !now.Before(AcceptedUntil(d.ExpiresAt, v.skew)) {
		return fail(ErrExpired, "")
	}
	if !p.lifetimeEnd.IsZero() && !now.Before(AcceptedUntil(p.lifetimeEnd, v.skew)) {
		return fail(ErrLifetime, "maximum lifetime passed")
	}
	if !d.NotBefore.IsZero() && now.Add(v.skew).Before(d.NotBefore) {
		return fail(ErrNotYetValid, "")
	}
	if !d.IssuedAt.IsZero() && now.Add(v.skew).Before(d.IssuedAt) {
		return fail(ErrNotYetValid, "issued in the future")
	}
	return nil
}

// AcceptedUntil is the instant from which a credential that ends at end
// counts as expired for a verifier that tolerates skew: end plus the skew,
// since the verifier's clock may run ahead of the issuer's. It is the one
// rule for expiry: the verifier refuses a credential from then on, and
// whatever vouches for a verified credential (the edge's Level 2
// assertions) must not outlast it. A zero end stays zero (no expiry).
func AcceptedUntil(end time.Time, skew time.Duration) time.Time {
	if end.IsZero() {
		return end
	}
	return end.Add(max(skew, 0))
}

// checkLifetime applies WithAllowNoExpiry and WithMaxLifetime to a
// credential's stated window. The window runs from the latest start (the
// credential is not accepted before it) to the earliest stated end; the
// skew plays no part, as both ends come from the same issuer. Without a
// stated start the window has no measure (it began whenever), so a
// maximum refuses it; a credential without an end is accepted, when it
// may be, until the maximum after its start (p.lifetimeEnd).
func (v *Verifier) checkLifetime(p *parsed) error {
	start := latest(p.d.NotBefore, p.d.IssuedAt)
	end := p.statedEnd
	switch {
	case end.IsZero() && !v.allowNoExpiry:
		return fail(ErrNoExpiry, "")
	case v.maxLifetime == 0:
		return nil
	case start.IsZero():
		return fail(ErrLifetime, "no start to measure it from")
	case end.IsZero():
		p.lifetimeEnd = start.Add(v.maxLifetime)
	case end.Sub(start) > v.maxLifetime:
		return fail(ErrLifetime, "")
	}
	return nil
}

func latest(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if !u.IsZero() && (t.IsZero() || u.After(t)) {
			t = u
		}
	}
	return t
}

func earliest(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if !u.IsZero() && (t.IsZero() || u.Before(t)) {
			t = u
		}
	}
	return t
}
