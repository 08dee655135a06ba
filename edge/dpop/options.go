package dpop

import (
	"time"
)

// Algorithms a proof may be signed with (RFC 7518 / RFC 8037 names).
const (
	AlgEdDSA = "EdDSA"
	AlgES256 = "ES256"
)

// Defaults of NewChecker.
const (
	// DefaultMaxAge is how long before now a proof's iat may lie: long
	// enough for a slow network and a request queued behind others, short
	// enough that a captured proof is soon useless, and the time its jti
	// is remembered for.
	DefaultMaxAge = 60 * time.Second
	// DefaultMaxFuture is how far after now iat may lie: clocks drift.
	DefaultMaxFuture = 5 * time.Second
	// MaxProofSize bounds the DPoP header: a proof is a few hundred
	// bytes, more than 8 KiB is not a proof.
	MaxProofSize = 8 << 10
	// maxJTI bounds the jti claim: a UUID or 32 random bytes fit.
	maxJTI = 256
)

// Option configures a Checker.
type Option func(*Checker)

// WithAlgs sets the algorithms a proof may be signed with. Only EdDSA and
// ES256 are supported; unknown names are ignored, and a list that leaves
// none makes the checker refuse every proof (ErrAlg).
func WithAlgs(algs ...string) Option {
	return func(c *Checker) {
		c.algs = algSet(0)
		for _, a := range algs {
			c.algs |= algBit(a)
		}
	}
}

// WithWindow sets how far before now (maxAge) and after now (maxFuture) a
// proof's iat may lie. Non-positive values keep the defaults.
func WithWindow(maxAge, maxFuture time.Duration) Option {
	return func(c *Checker) {
		if maxAge > 0 {
			c.maxAge = maxAge
		}
		if maxFuture > 0 {
			c.maxFuture = maxFuture
		}
	}
}

// WithClock sets the clock iat is compared with.
func WithClock(now func() time.Time) Option {
	return func(c *Checker) {
		if now != nil {
			c.now = now
		}
	}
}

type algSet uint8

const (
	algEdDSA algSet = 1 << iota
	algES256
)

func algBit(name string) algSet {
	switch name {
	case AlgEdDSA:
		return algEdDSA
	case AlgES256:
		return algES256
	}
	return 0
}

// Algs returns the names of the algorithms the checker accepts, in a fixed
// order, for dpop_signing_alg_values_supported and the algs parameter of a
// DPoP challenge.
func (c *Checker) Algs() []string {
	var out []string
	if c.algs&algEdDSA != 0 {
		out = append(out, AlgEdDSA)
	}
	if c.algs&algES256 != 0 {
		out = append(out, AlgES256)
	}
	return out
}
