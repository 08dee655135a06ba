package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// admission is step 5 of the pipeline: the one verification of a
// credential, whatever its carrier and format, to a *vc.Delegation: the
// route's rules for the request, the verifier, a presentation nonce's
// binding to a challenge, the front door's revocations and a DPoP
// binding. It knows the route through the fields below.
type admission struct {
	cfg      *Config
	site     *site.Site
	obs      *observe.Recorder
	verifier *vc.Verifier
	// checks are the per-request verification rules that do not depend on
	// the request (everything but derived audiences); hostChecks caches
	// checksFor's rules.
	checks     []vc.CheckOption
	hostChecks *checkCache
	dpop       *dpop.Checker
	// l3's nonce store binds presentation nonces; front, when on, keeps
	// the revocations of the credentials it issued.
	l3    *level3
	front *authserver.Server
}

// newAdmission builds the step from the parts h has built so far.
func newAdmission(h *Handler) admission {
	a := admission{cfg: &h.cfg, site: h.site, obs: h.obs, verifier: h.verifier, dpop: h.dpop, l3: &h.l3, front: h.front}
	if h.cfg.RequireAudience {
		a.checks = append(a.checks, vc.RequireAudience())
	}
	if len(h.cfg.RequiredScopes) > 0 {
		a.checks = append(a.checks, vc.RequireScopes(h.cfg.RequiredScopes...))
	}
	a.hostChecks = newCheckCache(h.cfg.Audiences, a.checks)
	return a
}

// VerifyCredential verifies raw as the handler verifies a credential
// presented on a request whose Host is host: the trusted issuers, the
// audiences (derived from host unless configured), the required scopes,
// require_presentation, the lifetime rules, JSON-LD contexts, chain
// fetching and revocation. Nothing else of a request applies: no carrier,
// no chain header, no per-tool policy. At Level 3 a presentation nonce
// must be a challenge of the handler's nonce store, as on a request. It
// returns the verifier's error, whose vc.Reason is the reason a request
// would be refused with. `caddy mcpi verify --config` checks a credential
// against a route with it.
func (h *Handler) VerifyCredential(ctx context.Context, raw []byte, host string) (*vc.Delegation, error) {
	r := (&http.Request{Host: host, Header: http.Header{}}).WithContext(ctx)
	return h.admit.verify(r, raw, nil)
}

// verify is the one verification of a credential presented on r (with the
// ancestors of its chain header): the route's rules for r, the verifier,
// the presentation's nonce binding, and the measurement.
func (a *admission) verify(r *http.Request, raw []byte, chain []string) (*vc.Delegation, error) {
	opts, bind, err := a.requestChecks(r, raw, chain)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	d, err := a.verifier.Verify(r.Context(), raw, opts...)
	if err == nil {
		err = bind.check(d)
	}
	if err == nil {
		err = a.checkGrantRevoked(r, d)
	}
	a.obs.Verification(time.Since(start), err, raw)
	if err != nil {
		return nil, err
	}
	return d, nil
}
