package vc

import (
	"context"
	"testing"
	"time"
)

// TestLifetime has one row per outcome of the lifetime rules (ErrNoExpiry,
// WithAllowNoExpiry, WithMaxLifetime) in every format and place a
// credential can come in: VC-JWT, vc+jwt, the two JSON proofs, inside a
// presentation, and as an ancestor. The Linked Data proofs are in
// TestLinkedDataDelegation.
func TestLifetime(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	day := 24 * time.Hour

	// jwt11 is the fixture's VC-JWT (iat, issuanceDate -1m; exp,
	// expirationDate +1h) changed by tweak.
	jwt11 := func(tweak func(c map[string]any)) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			c := f.vc11Claims(f.ed)
			if tweak != nil {
				tweak(c)
			}
			return mint(t, f.ed.priv, header("EdDSA", f.ed.kid), c)
		}
	}
	noEnd := func(c map[string]any) {
		delete(c, "exp")
		setPath(c, "vc.expirationDate", del)
	}
	// jsonCred: the fixture's JSON credential (issuanceDate -1m,
	// expirationDate +1h).
	jsonCred := f.signedJSON
	jcs2020 := func(t *testing.T, c map[string]any) []byte { return signEd25519JCS(t, f.ed, c, false) }
	jcs2022 := func(t *testing.T, c map[string]any) []byte { return signEddsaJCS2022(t, f.ed, c, nil) }
	noEndJSON := func(c map[string]any) { delete(c, "expirationDate") }
	// chain is chain3 (root -1h..+3h, middle -30m..+2h, leaf -1m..+1h)
	// with link i changed by tweak, given as the leaf and its ancestors.
	type input struct {
		raw       []byte
		ancestors [][]byte
	}
	chain := func(tweak func(i int, c map[string]any)) func(t *testing.T) input {
		return func(t *testing.T) input {
			ch := f.chain3(t, tweak)
			return input{raw: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}
	}
	one := func(raw func(t *testing.T) []byte) func(t *testing.T) input {
		return func(t *testing.T) input { return input{raw: raw(t)} }
	}
	rootOnly := func(tweak func(c map[string]any)) func(i int, c map[string]any) {
		return func(i int, c map[string]any) {
			if i == 0 {
				tweak(c)
			}
		}
	}
	window := func(from time.Duration, end any) func(c map[string]any) {
		return func(c map[string]any) {
			c["issuanceDate"] = fixedNow.Add(from).Format(time.RFC3339)
			setPath(c, "expirationDate", end)
		}
	}
	expiresAt := func(want time.Time) func(t *testing.T, d *Delegation) {
		return func(t *testing.T, d *Delegation) {
			if !d.ExpiresAt.Equal(want) {
				t.Errorf("ExpiresAt = %v, want %v", d.ExpiresAt, want)
			}
		}
	}

	tests := []struct {
		name   string
		in     func(t *testing.T) input
		opts   []Option
		want   error
		reason string
		detail string
		check  func(t *testing.T, d *Delegation)
	}{
		// No end: refused by default, in every format and place.
		{name: "VC-JWT without exp or expirationDate", in: one(jwt11(noEnd)), want: ErrNoExpiry, reason: "no_expiry"},
		{name: "vc+jwt without validUntil", in: one(func(t *testing.T) []byte {
			p := f.vc20Payload(f.ed)
			delete(p, "validUntil")
			h := header("EdDSA", f.ed.kid)
			h["typ"] = "vc+jwt"
			return mint(t, f.ed.priv, h, p)
		}), want: ErrNoExpiry, reason: "no_expiry"},
		{name: "JSON VC Ed25519Signature2020 without expirationDate", in: one(jsonCred(noEndJSON, jcs2020)),
			want: ErrNoExpiry, reason: "no_expiry"},
		{name: "JSON VC eddsa-jcs-2022 without expirationDate", in: one(jsonCred(noEndJSON, jcs2022)),
			want: ErrNoExpiry, reason: "no_expiry"},
		{name: "JSON VC: an unsigned proof.expires is not an end", in: one(func(t *testing.T) []byte {
			m := decodeJSON(t, jsonCred(noEndJSON, jcs2020)(t))
			setPath(m, "proof.expires", fixedNow.Add(time.Hour).Format(time.RFC3339))
			return mustJSON(t, m)
		}), want: ErrNoExpiry, reason: "no_expiry"},
		{name: "VP-JWT carrying a credential without an end", in: one(func(t *testing.T) []byte {
			return vpJWT(t, f.agent, [][]byte{jwt11(noEnd)(t)}, nil)
		}), want: ErrNoExpiry, reason: "no_expiry"},
		{name: "JSON VP carrying an ancestor without an end", in: one(func(t *testing.T) []byte {
			ch := f.chain3(t, rootOnly(noEndJSON))
			return signVPEd25519JCS(t, f.agent, jsonVP(t, f.agent, [][]byte{ch.root, ch.middle, ch.leaf}), vpProofOptions(f.agent))
		}), want: ErrNoExpiry, reason: "no_expiry", detail: "ancestor credential"},
		{name: "ancestor without an end", in: chain(rootOnly(noEndJSON)),
			want: ErrNoExpiry, reason: "no_expiry", detail: "ancestor credential"},

		// Any stated end will do.
		{name: "ok VC-JWT with exp only", in: one(jwt11(func(c map[string]any) { setPath(c, "vc.expirationDate", del) })),
			check: expiresAt(fixedNow.Add(time.Hour))},
		{name: "ok VC-JWT with expirationDate only", in: one(jwt11(func(c map[string]any) { delete(c, "exp") })),
			check: expiresAt(fixedNow.Add(time.Hour))},
		{name: "ok VC-JWT with constraints.notAfter only", in: one(jwt11(func(c map[string]any) {
			noEnd(c)
			setPath(c, "vc.credentialSubject.delegation.constraints.notAfter", fixedNow.Add(time.Hour).Unix())
		})), check: expiresAt(fixedNow.Add(time.Hour))},
		{name: "ok vc+jwt with validUntil", in: one(func(t *testing.T) []byte {
			h := header("EdDSA", f.ed.kid)
			h["typ"] = "vc+jwt"
			return mint(t, f.ed.priv, h, f.vc20Payload(f.ed))
		}), check: expiresAt(fixedNow.Add(time.Hour))},
		{name: "ok JSON VC eddsa-jcs-2022", in: one(jsonCred(nil, jcs2022)), check: expiresAt(fixedNow.Add(time.Hour))},
		{name: "ok chain", in: chain(nil), check: expiresAt(fixedNow.Add(time.Hour))},

		// WithAllowNoExpiry.
		{name: "ok VC-JWT without an end, allowed", in: one(jwt11(noEnd)), opts: []Option{WithAllowNoExpiry()},
			check: expiresAt(time.Time{})},
		{name: "ok JSON VC without an end, allowed", in: one(jsonCred(noEndJSON, jcs2020)), opts: []Option{WithAllowNoExpiry()},
			check: expiresAt(time.Time{})},
		{name: "ok ancestor without an end, allowed", in: chain(rootOnly(noEndJSON)), opts: []Option{WithAllowNoExpiry()},
			check: expiresAt(fixedNow.Add(time.Hour))},

		// WithMaxLifetime: the fixture's window is 61 minutes.
		{name: "lifetime over the maximum", in: one(jwt11(nil)), opts: []Option{WithMaxLifetime(time.Hour)},
			want: ErrLifetime, reason: "lifetime_too_long"},
		{name: "ok lifetime at the maximum", in: one(jwt11(nil)), opts: []Option{WithMaxLifetime(61 * time.Minute)},
			check: expiresAt(fixedNow.Add(time.Hour))},
		{name: "ok lifetime measured from the latest start", in: one(jwt11(func(c map[string]any) {
			c["iat"] = fixedNow.Add(-10 * day).Unix()
			setPath(c, "vc.issuanceDate", fixedNow.Add(-10*day).Format(time.RFC3339))
			c["nbf"] = fixedNow.Add(-time.Minute).Unix()
		})), opts: []Option{WithMaxLifetime(61 * time.Minute)}},
		{name: "lifetime measured to the earliest end", in: one(jwt11(func(c map[string]any) {
			setPath(c, "vc.expirationDate", fixedNow.Add(10*day).Format(time.RFC3339))
		})), opts: []Option{WithMaxLifetime(2 * time.Hour)}, check: expiresAt(fixedNow.Add(time.Hour))},
		{name: "lifetime without a start", in: one(jwt11(func(c map[string]any) {
			delete(c, "iat")
			setPath(c, "vc.issuanceDate", del)
		})), opts: []Option{WithMaxLifetime(day)}, want: ErrLifetime, reason: "lifetime_too_long", detail: "no start"},
		{name: "lifetime: an unsigned proof.expires does not shorten it", in: one(func(t *testing.T) []byte {
			m := decodeJSON(t, jsonCred(func(c map[string]any) {
				c["expirationDate"] = fixedNow.Add(10 * day).Format(time.RFC3339)
			}, jcs2020)(t))
			setPath(m, "proof.expires", fixedNow.Add(time.Minute).Format(time.RFC3339))
			return mustJSON(t, m)
		}), opts: []Option{WithMaxLifetime(day)}, want: ErrLifetime, reason: "lifetime_too_long"},
		{name: "ancestor over the maximum", in: chain(nil), opts: []Option{WithMaxLifetime(3 * time.Hour)},
			want: ErrLifetime, reason: "lifetime_too_long", detail: "ancestor credential"},
		{name: "ok chain within the maximum", in: chain(nil), opts: []Option{WithMaxLifetime(4 * time.Hour)},
			check: expiresAt(fixedNow.Add(time.Hour))},
		{name: "without an end, the maximum alone refuses it", in: one(jwt11(noEnd)), opts: []Option{WithMaxLifetime(day)},
			want: ErrNoExpiry, reason: "no_expiry"},

		// Both: a credential without an end lasts the maximum from its
		// start.
		{name: "ok without an end, allowed, ends at the maximum", in: one(jwt11(noEnd)),
			opts: []Option{WithAllowNoExpiry(), WithMaxLifetime(2 * time.Hour)}, check: expiresAt(fixedNow.Add(-time.Minute + 2*time.Hour))},
		{name: "without an end, allowed, past the maximum", in: one(jwt11(func(c map[string]any) {
			noEnd(c)
			c["iat"] = fixedNow.Add(-3 * time.Hour).Unix()
			setPath(c, "vc.issuanceDate", fixedNow.Add(-3*time.Hour).Format(time.RFC3339))
		})), opts: []Option{WithAllowNoExpiry(), WithMaxLifetime(2 * time.Hour)},
			want: ErrLifetime, reason: "lifetime_too_long", detail: "maximum lifetime passed"},
		{name: "without an end or a start, allowed, under a maximum", in: one(jwt11(func(c map[string]any) {
			noEnd(c)
			delete(c, "iat")
			setPath(c, "vc.issuanceDate", del)
		})), opts: []Option{WithAllowNoExpiry(), WithMaxLifetime(day)}, want: ErrLifetime, reason: "lifetime_too_long", detail: "no start"},
		// The root's end by the maximum (-2.5h + 3h) bounds the chain but
		// not its children's windows, which start later.
		{name: "ok ancestor without an end, allowed, ends the chain at the maximum",
			in:   chain(rootOnly(window(-150*time.Minute, del))),
			opts: []Option{WithAllowNoExpiry(), WithMaxLifetime(3 * time.Hour)}, check: expiresAt(fixedNow.Add(30 * time.Minute))},
		{name: "ancestor without an end, allowed, past the maximum", in: chain(rootOnly(window(-5*time.Hour, del))),
			opts: []Option{WithAllowNoExpiry(), WithMaxLifetime(3 * time.Hour)},
			want: ErrLifetime, reason: "lifetime_too_long", detail: "ancestor credential: maximum lifetime passed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in(t)
			d, err := f.verifier(tc.opts...).Verify(ctx, in.raw, ForAudience(serverDID), WithAncestors(in.ancestors...))
			expectOutcome(t, d, err, tc.want, tc.reason, tc.detail, tc.check)
		})
	}
}
