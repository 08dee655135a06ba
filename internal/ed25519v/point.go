package ed25519v

// The point arithmetic below is the extended twisted Edwards arithmetic of
// filippo.io/edwards25519 (edwards25519.go, scalarmult.go: BSD-3-Clause,
// Copyright 2017 The Go Authors), copied because that package keeps its
// intermediate representations and lookup tables unexported, and a table
// per key is the point of this package. Only the variable-time operations
// verification needs are here: every input is public.

import (
	"sync"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// point is a point in extended coordinates: x = X/Z, y = Y/Z, xy = T/Z.
type point struct{ x, y, z, t field.Element }

// p1xp1 is the completed representation an addition or doubling yields.
type p1xp1 struct{ x, y, z, t field.Element }

// affine is a point with Z = 1 in the form an addition reads:
// (y+x, y-x, 2d·x·y).
type affine struct{ ypx, ymx, t2d field.Element }

// The scalars are written in signed radix 2^window: digits in
// [-2^(window-1), 2^(window-1)), the last one up to 2^(window-1). A table
// holds, for every other digit position 2i, the multiples
// (j+1)·2^(2·window·i)·P for j < 2^(window-1): the odd positions are added
// first, then window doublings, then the even ones. So [a]A + [b]B costs
// 2·digits mixed additions and window doublings, where the stdlib's wNAF
// shares 252 doublings between [S]B and [k]A (and adds about 70 times).
const (
	window    = 6
	digits    = (253 + window - 1) / window // scalars are below L < 2^253
	half      = 1 << (window - 1)
	positions = (digits + 1) / 2
)

type combTable [positions][half]affine

// tableBytes is the memory one combTable holds.
const tableBytes = positions * half * 3 * 5 * 8

var d2 = func() *field.Element {
	d, err := new(field.Element).SetBytes([]byte{
		0xa3, 0x78, 0x59, 0x13, 0xca, 0x4d, 0xeb, 0x75,
		0xab, 0xd8, 0x41, 0x41, 0x4d, 0x0a, 0x70, 0x00,
		0x98, 0xe8, 0x79, 0x77, 0x79, 0x40, 0xc7, 0x8c,
		0x73, 0xfe, 0x6f, 0x2b, 0xee, 0x6c, 0x03, 0x52})
	if err != nil {
		panic(err)
	}
	return d.Add(d, d)
}()

func (v *point) identity() *point {
	v.x.Zero()
	v.y.One()
	v.z.One()
	v.t.Zero()
	return v
}

func (v *point) fromP1xP1(p *p1xp1) *point {
	v.x.Multiply(&p.x, &p.t)
	v.y.Multiply(&p.y, &p.z)
	v.z.Multiply(&p.z, &p.t)
	v.t.Multiply(&p.x, &p.y)
	return v
}

// addAffine sets v = p + q, or p - q if sub (-q is q with y+x and y-x
// swapped and 2dxy negated).
func (v *p1xp1) addAffine(p *point, q *affine, sub bool) *p1xp1 {
	qp, qm := &q.ypx, &q.ymx
	if sub {
		qp, qm = qm, qp
	}
	var ypx, ymx, pp, mm, tt2d, z2 field.Element
	ypx.Add(&p.y, &p.x)
	ymx.Subtract(&p.y, &p.x)
	pp.Multiply(&ypx, qp)
	mm.Multiply(&ymx, qm)
	tt2d.Multiply(&p.t, &q.t2d)
	z2.Add(&p.z, &p.z)
	v.x.Subtract(&pp, &mm)
	v.y.Add(&pp, &mm)
	if sub {
		v.z.Subtract(&z2, &tt2d)
		v.t.Add(&z2, &tt2d)
	} else {
		v.z.Add(&z2, &tt2d)
		v.t.Subtract(&z2, &tt2d)
	}
	return v
}

// double sets v = 2p (it reads only X, Y, Z of p).
func (v *p1xp1) double(p *point) *p1xp1 {
	var xx, yy, zz2, xpy field.Element
	xx.Square(&p.x)
	yy.Square(&p.y)
	zz2.Square(&p.z)
	zz2.Add(&zz2, &zz2)
	xpy.Add(&p.x, &p.y)
	xpy.Square(&xpy)
	v.y.Add(&yy, &xx)
	v.z.Subtract(&yy, &xx)
	v.x.Subtract(&xpy, &v.y)
	v.t.Subtract(&zz2, &v.z)
	return v
}

// add adds the digit d's multiple from t to v (variable time: d is public).
func (v *point) add(t *[half]affine, d int8, tmp *p1xp1) {
	switch {
	case d > 0:
		v.fromP1xP1(tmp.addAffine(v, &t[d-1], false))
	case d < 0:
		v.fromP1xP1(tmp.addAffine(v, &t[-d-1], true))
	}
}

// signedDigits writes the canonical scalar b (little endian, < 2^253) as
// digits of radix 2^window in [-half, half), the last in [0, half], with
// b = Σ d[i]·2^(window·i).
func signedDigits(b []byte) (d [digits]int8) {
	var carry int8
	for i := range digits {
		bit := i * window
		w := uint16(b[bit/8])
		if bit/8+1 < len(b) {
			w |= uint16(b[bit/8+1]) << 8
		}
		v := int8(w>>(bit%8)&(1<<window-1)) + carry
		carry = 0
		if v >= half && i < digits-1 {
			v -= 1 << window
			carry = 1
		}
		d[i] = v
	}
	return d
}

// doubleCombMult sets v = [a]A + [b]B, with A's and B's tables.
func (v *point) doubleCombMult(a []byte, ta *combTable, b []byte, tb *combTable) *point {
	da, db := signedDigits(a), signedDigits(b)
	var tmp p1xp1
	v.identity()
	for i := 1; i < digits; i += 2 {
		v.add(&ta[i/2], da[i], &tmp)
		v.add(&tb[i/2], db[i], &tmp)
	}
	// ×2^window: doublings that skip T (double reads no T), then one to a
	// full point.
	for range window - 1 {
		v.fromP1xP1NoT(tmp.double(v))
	}
	v.fromP1xP1(tmp.double(v))
	for i := 0; i < digits; i += 2 {
		v.add(&ta[i/2], da[i], &tmp)
		v.add(&tb[i/2], db[i], &tmp)
	}
	return v
}

// fromP1xP1NoT is fromP1xP1 without T, which is then stale: only for a
// point that is doubled next.
func (v *point) fromP1xP1NoT(p *p1xp1) *point {
	v.x.Multiply(&p.x, &p.t)
	v.y.Multiply(&p.y, &p.z)
	v.z.Multiply(&p.z, &p.t)
	return v
}

// encode returns the RFC 8032 encoding of v: y, with x's sign in the top
// bit.
func (v *point) encode(out *[32]byte) {
	var zinv, x, y field.Element
	zinv.Invert(&v.z)
	x.Multiply(&v.x, &zinv)
	y.Multiply(&v.y, &zinv)
	copy(out[:], y.Bytes())
	out[31] |= byte(x.IsNegative() << 7)
}

// newCombTable computes P's table. It costs about ten verifications.
func newCombTable(p *edwards25519.Point) *combTable {
	pts := make([]edwards25519.Point, positions*half)
	base := new(edwards25519.Point).Set(p)
	for i := range positions {
		pts[half*i].Set(base)
		for j := 1; j < half; j++ {
			pts[half*i+j].Add(&pts[half*i+j-1], base)
		}
		for range 2 * window {
			base.Add(base, base)
		}
	}
	// One inversion for every Z (Montgomery's trick): prefix[i] is the
	// product of Z_0..Z_{i-1}.
	prefix := make([]field.Element, len(pts)+1)
	prefix[0].One()
	for i := range pts {
		_, _, z, _ := pts[i].ExtendedCoordinates()
		prefix[i+1].Multiply(&prefix[i], z)
	}
	var inv field.Element
	inv.Invert(&prefix[len(pts)])
	t := new(combTable)
	for i := len(pts) - 1; i >= 0; i-- {
		x, y, z, tt := pts[i].ExtendedCoordinates()
		var zinv field.Element
		zinv.Multiply(&inv, &prefix[i]) // 1/Z_i
		inv.Multiply(&inv, z)           // 1/(Z_0..Z_{i-1})
		e := &t[i/half][i%half]
		e.ypx.Add(y, x)
		e.ypx.Multiply(&e.ypx, &zinv)
		e.ymx.Subtract(y, x)
		e.ymx.Multiply(&e.ymx, &zinv)
		e.t2d.Multiply(tt, d2)
		e.t2d.Multiply(&e.t2d, &zinv)
	}
	return t
}

// baseTable is the generator's table, built on first use.
var baseTable = sync.OnceValue(func() *combTable {
	return newCombTable(edwards25519.NewGeneratorPoint())
})
