package edge

import (
	"context"
	"net/http"

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
	opts, bind, err := h.requestChecks(r, raw, nil)
	if err != nil {
		return nil, err
	}
	d, err := h.verifier.Verify(ctx, raw, opts...)
	if err == nil {
		err = bind.check(d)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}
