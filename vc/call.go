package vc

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// Call is one Verify call, prepared: the credential trimmed and within the
// size limit, the call's rules applied. It is the seam for what implements
// Verify around a Verifier (the verified-delegation cache, vc/cache): such
// a wrapper keys on the call (AppendKey) and verifies through it
// (VerifySum), so the rules stay here and the wrapper needs none of them.
//
// A Call is a value of three pointers: preparing one allocates nothing.
// Release it once done; it must not be used after.
type Call struct {
	v   *Verifier
	raw []byte
	c   *checks
}

// Outcome is what a verification found besides its Delegation, for a
// cache of results.
type Outcome struct {
	// StatusChecked: a credentialStatus of the chain was checked, so the
	// result holds only as long as the status lists are trusted
	// (Verifier.StatusListTTL).
	StatusChecked bool
	// UnusedAncestors: some of the ancestors given (WithAncestors) are not
	// on the chain, nor copies of the credential itself. They are part of
	// the call's key all the same, so the holder of one credential could
	// make keys without end from junk ancestors: a cache must not store
	// such a result.
	UnusedAncestors bool
}

// Prepare starts a Verify of raw under opts; the errors are Verify's for a
// credential too large or empty.
func (v *Verifier) Prepare(raw []byte, opts []CheckOption) (Call, error) {
	if len(raw) > v.maxSize {
		return Call{}, fail(ErrTooLarge, "")
	}
	raw = trimSpace(raw)
	if len(raw) == 0 {
		return Call{}, fail(ErrMalformed, "empty")
	}
	// The options are funcs, so the checks they fill escape: pooled, they
	// cost no allocation per call. Nothing keeps c past the call (vc
	// starts no goroutine; a cache keeps results, not calls).
	c := checksPool.Get().(*checks)
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return Call{v: v, raw: raw, c: c}, nil
}

// Release returns the call's rules to the pool.
func (call Call) Release() {
	*call.c = checks{}
	checksPool.Put(call.c)
}

// Credential is the trimmed credential; Delegation.Hash is its SHA-256.
func (call Call) Credential() []byte { return call.raw }

// Verify is Verify of the call.
func (call Call) Verify(ctx context.Context) (*Delegation, error) {
	sum := sha256.Sum256(call.raw)
	d, _, err := call.v.verify(ctx, call.raw, &sum, call.c)
	return d, err
}

// VerifySum is Verify of the call given the credential's SHA-256 (a cache
// may have taken it on the way to its key), with what the verification
// found.
func (call Call) VerifySum(ctx context.Context, sum *[sha256.Size]byte) (*Delegation, Outcome, error) {
	return call.v.verify(ctx, call.raw, sum, call.c)
}

// keyVersion starts the rules' encoding; change it with the encoding.
const keyVersion = 3

// AppendKey appends to b the input whose SHA-256 names the call's result,
// and returns false when the result must not be shared between calls (a
// presentation nonce is required, or the rules cannot be keyed).
//
// The credential comes first, then the rules, so that a cache hashes the
// credential once and nothing else, and can take the credential's own
// SHA-256 (Delegation.Hash) on the way. The input ends with the
// credential's length (8 bytes), which says where the credential ends, and
// the rules' encoding after it is self-delimiting (lists and counts are
// length-prefixed), so no two (credential, rules) pairs share an input.
//
// Every field of checks is either encoded here or makes the call bypass
// the cache; TestCallKeyCoversChecks fails when checks grows.
func (call Call) AppendKey(b []byte) ([]byte, bool) {
	c := call.c
	if c.nonce != nil || c.requirePresentation || len(c.ancestors) > maxPooled {
		return nil, false
	}
	b = append(b, call.raw...)
	b = append(b, keyVersion)
	if c.requireAudience {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendStrings(b, c.audiences)
	b = appendStrings(b, c.requiredScopes)
	b = binary.AppendUvarint(b, uint64(len(c.ancestors)))
	for _, a := range c.ancestors {
		if len(a) > call.v.maxSize {
			return nil, false // Verify refuses it without hashing it
		}
		h := sha256.Sum256(trimSpace(a))
		b = append(b, h[:]...)
	}
	return binary.BigEndian.AppendUint64(b, uint64(len(call.raw))), true
}

// appendStrings appends a length-prefixed list.
func appendStrings(b []byte, l []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, s := range l {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// Now is the Verifier's clock (WithClock).
func (v *Verifier) Now() time.Time { return v.now() }

// ClockSkew is the skew allowed on a credential's times (WithClockSkew).
func (v *Verifier) ClockSkew() time.Duration { return v.skew }

// StatusListTTL is how long a fetched status list is trusted
// (WithStatusListTTL): a result whose Outcome.StatusChecked holds no
// longer.
func (v *Verifier) StatusListTTL() time.Duration { return v.statusCfg.ttl }
