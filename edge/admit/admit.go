// Package admit is the admission step of the edge: the one verification
// of a credential presented on a request, whatever its carrier and
// format, to a *vc.Delegation. It applies the route's rules for the
// request (audiences, configured or derived from the Host; scopes;
// presentations; the ancestors of a chain), binds a presentation nonce to
// a challenge of the nonce store, asks the front door whether it revoked
// a credential it issued, and checks a DPoP-bound credential's proof. The
// rules themselves are vc's.
package admit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Rules are the route's verification settings.
type Rules struct {
	// Audiences the route answers to; none: derived from each request's
	// Host (site.Audiences).
	Audiences       []string
	RequireAudience bool
	RequiredScopes  []string
	// RequirePresentation: a credential only inside a presentation
	// signed by the agent.
	RequirePresentation bool
	// MaxChain is the largest chain header read, in bytes.
	MaxChain int64
}

// Verifier verifies a delegation credential: a *vc.Verifier, or one with
// its results cached (vc/cache).
type Verifier interface {
	Verify(ctx context.Context, raw []byte, opts ...vc.CheckOption) (*vc.Delegation, error)
}

// Parts are what the step uses of the route.
type Parts struct {
	Site     *site.Site
	Verifier Verifier
	// Measure, when set, is told of every verification: how long it took,
	// its error and the credential.
	Measure func(took time.Duration, err error, raw []byte)
	// DPoP checks the proofs of DPoP-bound credentials.
	DPoP *dpop.Checker
	// Nonces, at Level 3, is the store whose challenges a presentation
	// nonce must be; nil below.
	Nonces challenge.NonceStore
	// SpendChallenge, at Level 3, spends a stateless challenge's nonce
	// for a presentation by holder (challenge.Service.SpendNonce);
	// handled is false for a nonce to take from Nonces instead.
	SpendChallenge func(ctx context.Context, nonce, holder string) (handled bool, err error)
	// Revoked, when the front door is on, reports whether it revoked the
	// credential id of a delegation's chain (false for ids it did not
	// issue).
	Revoked func(ctx context.Context, credentialID string) (bool, error)
}

// Admission is the step for one route. Safe for concurrent use.
type Admission struct {
	rules Rules
	parts Parts
	// checks are the rules that do not depend on the request (everything
	// but derived audiences); hostChecks caches Checks' rules per Host.
	checks     []vc.CheckOption
	hostChecks *checkCache
}

// New builds the step.
func New(rules Rules, parts Parts) *Admission {
	a := &Admission{rules: rules, parts: parts}
	if rules.RequireAudience {
		a.checks = append(a.checks, vc.RequireAudience())
	}
	if len(rules.RequiredScopes) > 0 {
		a.checks = append(a.checks, vc.RequireScopes(rules.RequiredScopes...))
	}
	a.hostChecks = newCheckCache(rules.Audiences, a.checks)
	return a
}

// Errors of a DPoP binding; the proof's own are dpop's.
var (
	// ErrDPoPBearer: a bound credential came without the DPoP scheme (as a
	// bearer, or in another carrier). RFC 9449 §7.2: a resource that also
	// takes bearer tokens must refuse a bound one used as a bearer.
	ErrDPoPBearer = errors.New("credential is bound to a DPoP key: send it as \"Authorization: DPoP <credential>\" with a DPoP proof header (RFC 9449)")
	// ErrDPoPNotBound: the DPoP scheme with a credential that names no key.
	// Accepting it would hide from the client that its credential is a
	// plain bearer (a binding lost on the way), so it is refused.
	ErrDPoPNotBound = errors.New("credential is not DPoP-bound (no cnf.jkt): send it with the Bearer scheme, or get a bound one by proving a key at the token endpoint")
)

// Verify is the one verification of a credential presented on r (with the
// ancestors of its chain header): the route's rules for r, the verifier,
// the presentation's nonce binding, the front door's revocations, and the
// measurement.
func (a *Admission) Verify(r *http.Request, raw []byte, chain []string) (*vc.Delegation, error) {
	opts, bind, err := a.requestChecks(r, raw, chain)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	d, err := a.parts.Verifier.Verify(r.Context(), raw, opts...)
	if err == nil {
		err = bind.check(d)
	}
	if err == nil {
		err = a.checkRevoked(r.Context(), d)
	}
	if a.parts.Measure != nil {
		a.parts.Measure(time.Since(start), err, raw)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Checks returns the verification rules for r: the configured ones plus
// the audiences, derived from the Host when none are configured. The slice
// is shared between requests (its capacity is its length, so a caller's
// append copies it): callers must not modify its elements.
func (a *Admission) Checks(r *http.Request) []vc.CheckOption {
	return a.hostChecks.get(a.parts.Site.Host(r))
}

// CallChecks are the rules for the credential of a handshake verify call:
// Checks', and the ancestors of a chained credential when the request
// carries them in the chain header (inside a presentation they need none).
// require_presentation is not among them: the signed challenge already
// proves the agent holds its key.
func (a *Admission) CallChecks(r *http.Request, chain []string) ([]vc.CheckOption, error) {
	opts, err := a.withChain(a.Checks(r), chain)
	if err != nil {
		// An unreadable chain leaves the credential unverifiable (-32004).
		return nil, fmt.Errorf("%w: %w", challenge.ErrUntrustedCredential, err)
	}
	return opts, nil
}

// requestChecks are the verification rules for the credential raw of r:
// Checks', require_presentation, the ancestors given in chain, and at
// Level 3 the binding of a presentation nonce to a challenge of the nonce
// store. The binding's check must run on the verified delegation.
func (a *Admission) requestChecks(r *http.Request, raw []byte, chain []string) ([]vc.CheckOption, *nonceBinding, error) {
	opts := a.Checks(r)
	if a.rules.RequirePresentation {
		opts = append(opts, vc.RequirePresentation())
	}
	opts, err := a.withChain(opts, chain)
	if err != nil {
		return nil, nil, err
	}
	var bind *nonceBinding
	if a.parts.Nonces != nil && hasPresentationNonce(raw) {
		bind = &nonceBinding{ctx: r.Context(), store: a.parts.Nonces, spend: a.parts.SpendChallenge}
		opts = append(opts, vc.WithPresentationNonce(bind.consume))
	}
	return opts, bind, nil
}

// withChain adds to opts the ancestors read from the values of the chain
// header, if any. opts may be Checks' shared slice: its capacity is its
// length, so appending copies it.
func (a *Admission) withChain(opts []vc.CheckOption, chain []string) ([]vc.CheckOption, error) {
	if len(chain) == 0 {
		return opts, nil
	}
	ancestors, err := carrier.ParseChain(chain, a.rules.MaxChain)
	if err != nil {
		return nil, err
	}
	if len(ancestors) > 0 {
		opts = append(opts, vc.WithAncestors(ancestors...))
	}
	return opts, nil
}

// checkRevoked refuses a delegation any of whose credentials the front
// door issued and has since revoked (on any replica).
func (a *Admission) checkRevoked(ctx context.Context, d *vc.Delegation) error {
	if a.parts.Revoked == nil {
		return nil
	}
	for _, id := range d.Chain {
		revoked, err := a.parts.Revoked(ctx, id)
		if err != nil {
			return fmt.Errorf("%w: revocation record: %v", vc.ErrStatusUnavailable, err)
		}
		if revoked {
			return fmt.Errorf("%w: revoked at the authorization server", vc.ErrRevoked)
		}
	}
	return nil
}

// CheckBinding enforces a credential's DPoP binding on r: nothing for an
// unbound credential sent as a bearer; for a bound one, the DPoP scheme
// and a valid proof by the bound key, for the URL as the client addressed
// it.
func (a *Admission) CheckBinding(r *http.Request, cred *carrier.Credential, d *vc.Delegation) error {
	if d.CnfJKT == "" {
		if cred.DPoP {
			return ErrDPoPNotBound
		}
		return nil
	}
	if cred.Carrier != carrier.Authorization || !cred.DPoP {
		return ErrDPoPBearer
	}
	proof, err := dpop.ProofHeader(r.Header)
	if err != nil {
		return err
	}
	s := a.parts.Site
	method, u := s.Original(r)
	_, err = a.parts.DPoP.Check(r.Context(), proof, dpop.Expect{
		Method:      method,
		URL:         s.Origin(r) + u.EscapedPath(),
		AccessToken: string(cred.Raw),
		JKT:         d.CnfJKT,
	})
	return err
}
