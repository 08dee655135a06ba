package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

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
	return h.verify(r, raw, nil)
}

// verify is the one verification of a credential presented on r (with the
// ancestors of its chain header): the route's rules for r, the verifier,
// the presentation's nonce binding, and the measurement.
func (h *Handler) verify(r *http.Request, raw []byte, chain []string) (*vc.Delegation, error) {
	opts, bind, err := h.requestChecks(r, raw, chain)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	d, err := h.verifier.Verify(r.Context(), raw, opts...)
	if err == nil {
		err = bind.check(d)
	}
	if err == nil {
		err = h.checkGrantRevoked(r, d)
	}
	h.obs.Verification(time.Since(start), err, raw)
	if err != nil {
		return nil, err
	}
	return d, nil
}
