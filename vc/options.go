package vc

import (
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// JWS algorithms this package can verify. Nothing else is ever accepted.
const (
	AlgEdDSA  = "EdDSA"  // Ed25519
	AlgES256K = "ES256K" // ECDSA secp256k1 + SHA-256
	AlgES256  = "ES256"  // ECDSA P-256 + SHA-256
)

// AnyIssuer, given to WithTrustedIssuers, accepts every resolvable issuer.
const AnyIssuer = "*"

const (
	defaultSkew    = 60 * time.Second
	defaultMaxSize = 64 << 10
)

// algSet is a set of the three supported algorithms.
type algSet uint8

const (
	algEdDSA algSet = 1 << iota
	algES256K
	algES256
	allAlgs = algEdDSA | algES256K | algES256
)

func algBit(alg string) algSet {
	switch alg {
	case AlgEdDSA:
		return algEdDSA
	case AlgES256K:
		return algES256K
	case AlgES256:
		return algES256
	}
	return 0
}

// allows reports whether alg is supported and allowed. "none", HS*, RS* and
// every other name map to no bit and are refused.
func (s algSet) allows(alg string) bool {
	b := algBit(alg)
	return b != 0 && s&b != 0
}

// Verifier verifies delegation credentials. Safe for concurrent use: it is
// not changed after NewVerifier.
type Verifier struct {
	resolver didresolver.Resolver
	now      func() time.Time
	skew     time.Duration
	algs     algSet
	maxSize  int
	trusted  map[string]struct{} // nil: any issuer
	ld       ldProofVerifier     // nil: Linked Data proofs are unsupported
	status   statusChecker       // nil: credentialStatus is not checked (see verify.go)
}

// Option configures a Verifier.
type Option func(*Verifier)

// WithClock injects the clock. Default time.Now.
func WithClock(now func() time.Time) Option {
	return func(v *Verifier) {
		if now != nil {
			v.now = now
		}
	}
}

// WithClockSkew tolerated on every date check. Default 60s; negative
// values count as 0.
func WithClockSkew(d time.Duration) Option {
	return func(v *Verifier) { v.skew = max(d, 0) }
}

// WithAllowedAlgs restricts JWS algorithms to a subset of EdDSA, ES256K,
// ES256 (the default, and the maximum: anything else is refused). Names
// outside the three are ignored, so an option naming none of them allows
// no algorithm at all. The JSON proofs (Ed25519Signature2020,
// eddsa-jcs-2022) count as EdDSA.
func WithAllowedAlgs(algs ...string) Option {
	return func(v *Verifier) {
		v.algs = 0
		for _, a := range algs {
			v.algs |= algBit(a)
		}
	}
}

// WithMaxSize caps the presented credential. Default 64 KiB; n <= 0 keeps
// the default.
func WithMaxSize(n int) Option {
	return func(v *Verifier) {
		if n > 0 {
			v.maxSize = n
		}
	}
}

// WithTrustedIssuers accepts only credentials whose (root) issuer is one of
// dids. Without it (or with AnyIssuer) every resolvable issuer is accepted.
// The last WithTrustedIssuers wins; one given no DIDs trusts no issuer.
func WithTrustedIssuers(dids ...string) Option {
	return func(v *Verifier) {
		v.trusted = make(map[string]struct{}, len(dids))
		for _, d := range dids {
			if d == AnyIssuer {
				v.trusted = nil
				return
			}
			v.trusted[d] = struct{}{}
		}
	}
}

// NewVerifier returns a Verifier resolving issuer keys with r.
func NewVerifier(r didresolver.Resolver, opts ...Option) *Verifier {
	v := &Verifier{
		resolver: r,
		now:      time.Now,
		skew:     defaultSkew,
		algs:     allAlgs,
		maxSize:  defaultMaxSize,
	}
	for _, o := range opts {
		if o != nil {
			o(v)
		}
	}
	return v
}

// CheckOption adds per-request rules to one Verify call.
type CheckOption func(*checks)

type checks struct {
	audiences       []string
	requireAudience bool
	requiredScopes  []string
}

// ForAudience: if the credential names an audience, one of its values must
// equal one of audiences. A credential naming none passes unless
// RequireAudience is also given (real KYA-OS mints carry no aud).
//
// Every place that names an audience is a restriction of its own and each
// must be met: the JWT "aud", credentialSubject.delegation.constraints.audience
// and credentialSubject.constraints.audience. Without ForAudience a
// credential that names an audience is rejected (RFC 7519 §4.1.3: a
// recipient that does not identify itself with the audience must reject).
func ForAudience(audiences ...string) CheckOption {
	return func(c *checks) { c.audiences = append(c.audiences, audiences...) }
}

// RequireAudience rejects credentials that name no audience.
func RequireAudience() CheckOption {
	return func(c *checks) { c.requireAudience = true }
}

// RequireScopes: every scope must be granted (exact match).
func RequireScopes(scopes ...string) CheckOption {
	return func(c *checks) { c.requiredScopes = append(c.requiredScopes, scopes...) }
}
