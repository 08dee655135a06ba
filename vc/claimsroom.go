package vc

import "sync"

// claimsRoom is a VC-JWT's parsed credential and room for the parts of its
// claims that jsonScan would otherwise allocate one by one: the vc
// credential, its delegation, the constraints of the delegation and of the
// subject, and the first string lists. A KYA-OS credential uses each once,
// so parsing one costs one allocation for all of them with the parsed
// credential (parseJWS), not five. What does not fit (a credential both at
// the top level and under vc, more lists) is allocated as before. A
// presentation's claims need none of it but a list (its aud), for which
// the whole room is allocated: presentations are rare, and their parse
// costs dozens of allocations besides.
//
// Everything in it lives as long as the parsed credential: a Delegation
// shares none of it (delegationOf copies the slices, and the strings are
// the decoded text's).
type claimsRoom struct {
	parsed parsed
	cred   credential
	deleg  delegationClaim
	cons   [2]constraints
	strs   [8]string

	credUsed, delegUsed, strsUsed bool
	consUsed                      int
}

// room returns the scanner's claimsRoom, taking one on first use.
func (s *jsonScan) room() *claimsRoom {
	if s.claims == nil {
		s.claims = roomPool.Get().(*claimsRoom)
	}
	return s.claims
}

// roomPool recycles the rooms of the credentials Verifier.verify parsed
// and is done with (releaseRoom): a fresh credential on every request (an
// edge's cache miss) would otherwise allocate 2 KB of scratch each. A room
// that is not released (a presentation's credentials, ancestors, a parse
// that failed) is left to the collector.
var roomPool = sync.Pool{New: func() any { return new(claimsRoom) }}

// releaseRoom returns p's room to the pool, if it has one. Nothing may use
// p, or anything it points to in the room, afterwards: Verifier.verify
// calls it for the leaf credential it parsed, once it has made the
// Delegation, which shares nothing with the room (delegationOf copies the
// slices; the strings are the decoded text's, which is not pooled).
func releaseRoom(p *parsed) {
	r := p.room
	if r == nil {
		return
	}
	*r = claimsRoom{}
	roomPool.Put(r)
}

func (r *claimsRoom) credential() *credential {
	if r.credUsed {
		return new(credential)
	}
	r.credUsed = true
	return &r.cred
}

func (r *claimsRoom) delegation() *delegationClaim {
	if r.delegUsed {
		return new(delegationClaim)
	}
	r.delegUsed = true
	return &r.deleg
}

func (r *claimsRoom) constraints() *constraints {
	if r.consUsed == len(r.cons) {
		return new(constraints)
	}
	r.consUsed++
	return &r.cons[r.consUsed-1]
}

// strings returns an empty slice with room for at least n strings: the
// room's own (once), else a new one of at least eight.
func (r *claimsRoom) strings(n int) []string {
	if !r.strsUsed && n <= len(r.strs) {
		r.strsUsed = true
		return r.strs[:0]
	}
	return make([]string, 0, max(8, n))
}
