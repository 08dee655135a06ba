package vc

import (
	"context"
	"net/http"
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

	// MaxChainDepth is the most credentials a chain may have, root and
	// leaf included (docs/protocol/mcpi.md#chains). WithMaxChainDepth can only
	// lower it.
	MaxChainDepth = 10
	// maxPooled bounds the credentials given for one chain (ancestors and
	// the credentials of a presentation), so the work per request is
	// bounded before anything is linked.
	maxPooled = 2 * MaxChainDepth

	defaultPresentationLifetime = 5 * time.Minute
	defaultStatusTTL            = 60 * time.Second
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

// Verifier verifies delegation credentials. Safe for concurrent use: its
// configuration is not changed after NewVerifier, and its status-list and
// result caches are synchronized.
type Verifier struct {
	resolver didresolver.Resolver
	now      func() time.Time
	skew     time.Duration
	algs     algSet
	maxSize  int
	trusted  map[string]struct{} // nil: any issuer
	trustFn  func(string) bool   // nil: only trusted
	ld       ldProofVerifier     // nil: Linked Data proofs are unsupported
	status   statusChecker       // nil: credentialStatus is not checked (see status.go)
	maxDepth int                 // 1..MaxChainDepth
	// vpLifetime bounds how long after its issuance a presentation is
	// accepted, whatever its exp says.
	vpLifetime time.Duration
	replay     ReplayGuard // nil: presentation ids are not tracked
	statusCfg  statusConfig
	fetch      *chainFetcher // nil: parents are never fetched (see chainfetch.go)
	fetchCfg   *ChainFetch
	trace      func(context.Context) (context.Context, func(error)) // nil: none (see trace.go)

	// maxLifetime bounds a credential's validity window (0: no bound);
	// allowNoExpiry accepts credentials without an end (see checkLifetime).
	maxLifetime   time.Duration
	allowNoExpiry bool
}

// statusConfig is what the status options set; NewVerifier builds the
// checker from it once every option has been applied.
type statusConfig struct {
	off          bool
	client       *http.Client
	allowPrivate bool
	ttl          time.Duration
	staleIfError time.Duration
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

// WithTrustedIssuerFunc also accepts a (root) issuer for which trusts
// reports true, beside the DIDs of WithTrustedIssuers: a family of DIDs
// the caller vouches for (the users whose DIDs an edge hosts). It adds
// nothing when every issuer is trusted already.
func WithTrustedIssuerFunc(trusts func(did string) bool) Option {
	return func(v *Verifier) { v.trustFn = trusts }
}

// WithMaxChainDepth lowers the most credentials a delegation chain may
// have, root and leaf included. Default and maximum MaxChainDepth (10);
// n <= 0 keeps the default, larger values are capped; 1 refuses every
// chain with an ancestor.
func WithMaxChainDepth(n int) Option {
	return func(v *Verifier) {
		if n > 0 {
			v.maxDepth = min(n, MaxChainDepth)
		}
	}
}

// WithPresentationLifetime bounds how long a presentation is accepted
// after it was issued (VP-JWT iat, JSON VP proof.created), whatever its exp
// says; a presentation is a proof of possession, not a credential. Default
// 5 minutes; d <= 0 keeps the default.
func WithPresentationLifetime(d time.Duration) Option {
	return func(v *Verifier) {
		if d > 0 {
			v.vpLifetime = d
		}
	}
}

// WithMaxLifetime refuses, with ErrLifetime, a credential whose validity
// window is longer than d: from its start (the latest of iat, nbf,
// issuanceDate, validFrom and a delegation's constraints.notBefore) to its
// end (the earliest of exp, expirationDate, validUntil and a delegation's
// constraints.notAfter; a JSON proof's expires still bounds when the
// credential is accepted, but is not its end). With it a credential must
// state a start, or its window has no measure and it is refused too. Every
// credential of a chain is held to it, each on its own. A credential
// without an end, accepted only with WithAllowNoExpiry, is then accepted
// until d after its start, and Delegation.ExpiresAt says so. Default: no
// maximum, as with d <= 0.
func WithMaxLifetime(d time.Duration) Option {
	return func(v *Verifier) { v.maxLifetime = max(d, 0) }
}

// WithAllowNoExpiry accepts credentials that state no end of validity:
// none of exp, expirationDate, validUntil and constraints.notAfter (a
// proof's expires does not count: it is the proof's end, and an
// Ed25519Signature2020 proof is not even signed). By default they are
// refused with ErrNoExpiry, since a delegation that never expires stays
// usable by whoever obtains it until its issuer revokes it, if it can.
// With WithMaxLifetime such a credential is accepted until the maximum
// after its start; without it, forever (a cached result is still served
// for at most vc/cache's TTL). Status list credentials are not
// delegations and need no end either way: a fetched list is used for
// WithStatusListTTL.
func WithAllowNoExpiry() Option {
	return func(v *Verifier) { v.allowNoExpiry = true }
}

// ReplayGuard records presentation ids so that each is accepted once.
// Consume must atomically record id for ttl and fail if it was already
// recorded (a SET NX): concurrent Consume calls for one id must not both
// succeed. Any error rejects the presentation with ErrReplay wrapping it,
// so a store outage fails closed and the caller can tell it apart with
// errors.Is on its own sentinel.
type ReplayGuard interface {
	Consume(ctx context.Context, id string, ttl time.Duration) error
}

// WithReplayGuard makes every presentation single-use: once it has passed
// every other check, its id is consumed from g. The id is "vp:" and a
// hash of the holder and the presentation's jti/id, or, when it has none,
// of its signed bytes (which an attacker cannot vary), so store keys never
// hold presentation content. The ttl is how much longer the presentation
// would be accepted (its lifetime plus the clock skew). Without a guard a
// presentation can be replayed until it expires unless its nonce is
// checked (WithPresentationNonce).
func WithReplayGuard(g ReplayGuard) Option {
	return func(v *Verifier) { v.replay = g }
}

// WithStatusLists sets how status list credentials are fetched: with
// client (nil: a default one), through the SSRF guard unless allowPrivate
// (see didresolver.GuardedClient; a client whose transport cannot be
// guarded makes every status check fail with ErrStatusUnavailable). Lists
// are fetched over https only, without redirects, capped in size (1 MiB,
// 4 MiB decoded) and time (5s). Revocation checking is on by default with
// a guarded default client, so this option is needed only for another
// client or for private addresses; of WithStatusLists and
// WithoutStatusCheck the last one given wins.
func WithStatusLists(client *http.Client, allowPrivate bool) Option {
	return func(v *Verifier) {
		v.statusCfg.off = false
		v.statusCfg.client = client
		v.statusCfg.allowPrivate = allowPrivate
	}
}

// WithoutStatusCheck turns revocation checking off: credentialStatus is
// ignored. For deployments that check revocation elsewhere.
func WithoutStatusCheck() Option {
	return func(v *Verifier) { v.statusCfg.off = true }
}

// WithStatusListTTL sets how long a fetched and verified status list is
// used before it is fetched again (sooner if the list credential expires).
// Default 60s; d <= 0 keeps the default.
func WithStatusListTTL(d time.Duration) Option {
	return func(v *Verifier) {
		if d > 0 {
			v.statusCfg.ttl = d
		}
	}
}

// WithStatusStaleIfError lets a status list that can no longer be fetched
// (or whose new copy does not verify) be used for up to d past its TTL.
// Default 0: a status that cannot be established fails closed with
// ErrStatusUnavailable. A longer window keeps the edge up through a status
// server outage at the cost of learning of revocations later.
func WithStatusStaleIfError(d time.Duration) Option {
	return func(v *Verifier) { v.statusCfg.staleIfError = max(d, 0) }
}

// NewVerifier returns a Verifier resolving issuer keys with r.
func NewVerifier(r didresolver.Resolver, opts ...Option) *Verifier {
	v := &Verifier{
		resolver:   r,
		now:        time.Now,
		skew:       defaultSkew,
		algs:       allAlgs,
		maxSize:    defaultMaxSize,
		maxDepth:   MaxChainDepth,
		vpLifetime: defaultPresentationLifetime,
		statusCfg:  statusConfig{ttl: defaultStatusTTL},
	}
	for _, o := range opts {
		if o != nil {
			o(v)
		}
	}
	if !v.statusCfg.off {
		v.status = newStatusLists(v, v.statusCfg)
	}
	if v.fetchCfg != nil {
		v.fetch = newChainFetcher(v, *v.fetchCfg)
	}
	return v
}

// CheckOption adds per-request rules to one Verify call.
type CheckOption func(*checks)

// checks are the per-call rules. Every field must be part of the result
// cache key (Call.AppendKey) or make the call bypass the cache.
type checks struct {
	audiences           []string
	requireAudience     bool
	requiredScopes      []string
	ancestors           [][]byte
	nonce               func(nonce, holder string) error
	requirePresentation bool
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
	return func(c *checks) { c.audiences = appendShared(c.audiences, audiences) }
}

// RequireAudience rejects credentials that name no audience.
func RequireAudience() CheckOption {
	return func(c *checks) { c.requireAudience = true }
}

// RequireScopes: every scope must be granted (exact match).
func RequireScopes(scopes ...string) CheckOption {
	return func(c *checks) { c.requiredScopes = appendShared(c.requiredScopes, scopes) }
}

// appendShared appends l to dst, and into an empty dst gives l itself
// rather than a copy made on every call: the rules only ever read their
// lists, and l is capped so that a later append copies it instead of
// writing into the caller's array.
func appendShared(dst, l []string) []string {
	if len(dst) == 0 {
		return l[:len(l):len(l)]
	}
	return append(dst, l...)
}

// WithAncestors gives the ancestors of the credential (or of the leaf of a
// presentation), in any order, each a VC-JWT or a JSON credential, from a
// separate carrier such as a KYA-OS-Delegation-Chain header. They are
// linked to the leaf by delegation.parentId and verified like the leaf;
// being sent proves nothing. Credentials not on the leaf's chain are
// ignored, but each must parse, and at most 20 may be given.
func WithAncestors(raws ...[]byte) CheckOption {
	return func(c *checks) { c.ancestors = append(c.ancestors, raws...) }
}

// WithPresentationNonce binds presentations to the caller's handshake:
// a presentation must carry a nonce (VP-JWT "nonce", JSON VP
// proof.challenge) and check must accept it, typically by consuming it
// from a nonce store. check is called at most once per Verify, and only
// for a presentation that passed every other check, so forgeries cannot
// burn nonces. check also gets the presentation's holder (the agent, whose
// signature was verified), so that it can refuse a nonce issued to another
// agent without spending it. Its error is wrapped with ErrPresentation. A
// bare credential is not affected (see RequirePresentation).
func WithPresentationNonce(check func(nonce, holder string) error) CheckOption {
	return func(c *checks) { c.nonce = check }
}

// RequirePresentation rejects a bare credential with
// ErrPresentationRequired: only a presentation signed by the agent, which
// proves possession of its key, is accepted.
func RequirePresentation() CheckOption {
	return func(c *checks) { c.requirePresentation = true }
}
