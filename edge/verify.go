package edge

import (
	"context"
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/edge/admit"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
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
	return h.admit.Verify(r, raw, nil)
}

// newAdmission builds the admission step (edge/admit) with cfg's rules.
func newAdmission(cfg *Config, parts admit.Parts) *admit.Admission {
	return admit.New(admit.Rules{
		Audiences:           cfg.Audiences,
		RequireAudience:     cfg.RequireAudience,
		RequiredScopes:      cfg.RequiredScopes,
		RequirePresentation: cfg.RequirePresentation,
		MaxChain:            carrier.MaxAncestors * cfg.MaxCredentialSize,
	}, parts)
}
