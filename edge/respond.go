package edge

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/level3"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/edge/wellknown"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The handler writes its 4xx responses itself instead of returning
// caddyhttp.Error: MCP clients need the WWW-Authenticate challenge (it points
// them at the RFC 9728 document) and the JSON body, and Caddy's default
// error handling sends only a status line.

// rejection is how one refused request is answered.
type rejection struct {
	status int
	// code is the RFC 6750 error code: invalid_token, invalid_request or
	// insufficient_scope.
	code string
	// description is human text: the text of a sentinel error, never of a
	// wrapped one, so nothing from the request leaks into the response.
	description string
	// reason is vc.Reason of a verification error ("expired", …); empty
	// when the request did not get as far as verification.
	reason string
	// scope lists the route's required scopes for insufficient_scope.
	scope string
	// challenge: send WWW-Authenticate (401 and 403).
	challenge bool
	// tag is a short stable name for logs: reason when set, else one of
	// the handler's own (no_credential, conflicting_credentials, …).
	tag string
	// rpc, when not 0, is the JSON-RPC error code the refusal is written
	// with instead of the RFC 6750 body: for a body that is no MCP
	// request at all, which an MCP client reads as a JSON-RPC error.
	rpc int
	// audiences are the audiences the route accepts, for wrong_audience:
	// the configured ones or those derived from the Host, never secret.
	audiences []string
	// dpopError, for a refused DPoP-bound credential, is the error of the
	// DPoP challenge sent beside the Bearer one (RFC 9449 §7.1).
	dpopError string
}

// refusal is rej as the refusal the handler writes.
func (rej rejection) refusal() *refusal.Refusal {
	if rej.rpc != 0 {
		return &refusal.Refusal{Status: rej.status, Reason: rej.tag, Body: mcp.ErrorResponse(nil, rej.rpc, "mcpi: "+rej.description)}
	}
	return &refusal.Refusal{Status: rej.status, Reason: rej.tag, OAuth: &refusal.OAuth{
		Code: rej.code, Description: rej.description, VCReason: rej.reason, Scope: rej.scope,
		Audiences: rej.audiences, Challenge: rej.challenge, DPoPError: rej.dpopError,
	}}
}

// vcSentinels are vc's errors; the first one an error wraps gives the
// description of a 401.
var vcSentinels = []error{
	vc.ErrTooLarge, vc.ErrMalformed, vc.ErrUnsupportedFormat, vc.ErrAlgorithm,
	vc.ErrIssuerUnresolved, vc.ErrUnknownKey, vc.ErrKeyNotAuthorized, vc.ErrSignature,
	vc.ErrType, vc.ErrExpired, vc.ErrNoExpiry, vc.ErrLifetime, vc.ErrNotYetValid, vc.ErrAudience, vc.ErrUntrustedIssuer,
	vc.ErrMissingScope, vc.ErrChainIncomplete, vc.ErrChainFetch, vc.ErrChain, vc.ErrStatusUnavailable,
	vc.ErrStatusList, vc.ErrRevoked, vc.ErrPresentationRequired, vc.ErrPresentation,
	vc.ErrHolder, vc.ErrReplay,
}

// rejectionFor maps every error the handler can refuse a request with to its
// answer. This is the only place that decides statuses.
func (cfg *Config) rejectionFor(err error) rejection {
	if rej, ok := dpopRejection(err); ok {
		return rej
	}
	switch {
	case errors.Is(err, carrier.ErrNoCredential):
		return rejection{status: http.StatusUnauthorized, code: "invalid_token", description: carrier.ErrNoCredential.Error(), challenge: true, tag: "no_credential"}
	case errors.Is(err, carrier.ErrConflict):
		return rejection{status: http.StatusBadRequest, code: "invalid_request", description: carrier.ErrConflict.Error(), tag: "conflicting_credentials"}
	case errors.Is(err, carrier.ErrBodyTooLarge):
		return rejection{status: http.StatusRequestEntityTooLarge, code: "invalid_request", tag: "body_too_large",
			description: fmt.Sprintf("%s: the limit is %d bytes (max_body_size); send a smaller body, or raise max_body_size", carrier.ErrBodyTooLarge, cfg.MaxBodySize)}
	case errors.Is(err, carrier.ErrBodyRead):
		return rejection{status: http.StatusBadRequest, code: "invalid_request", description: carrier.ErrBodyRead.Error(), tag: "body_unreadable"}
	case errors.Is(err, carrier.ErrBodyNotJSON):
		return rejection{status: http.StatusBadRequest, code: "invalid_request", description: carrier.ErrBodyNotJSON.Error() + ": send one JSON-RPC message or batch as UTF-8 JSON",
			tag: "body_unreadable", rpc: mcp.CodeParseError}
	case errors.Is(err, errNotJSONMediaType):
		return rejection{status: http.StatusUnsupportedMediaType, code: "invalid_request", description: errNotJSONMediaType.Error(),
			tag: "unsupported_media_type", rpc: mcp.CodeInvalidRequest}
	case errors.Is(err, carrier.ErrForeignBearer):
		return rejection{status: http.StatusUnauthorized, code: "invalid_token", description: carrier.ErrForeignBearer.Error(), reason: "not_a_delegation", challenge: true, tag: "not_a_delegation"}
	case errors.Is(err, assertion.ErrDelegationExpired):
		// Level 2: the delegation expired between verification and signing.
		return rejection{status: http.StatusUnauthorized, code: "invalid_token", description: vc.ErrExpired.Error(), reason: "expired", challenge: true, tag: "expired"}
	case errors.Is(err, carrier.ErrChainTooLarge):
		return rejection{status: http.StatusBadRequest, code: "invalid_request", description: carrier.ErrChainTooLarge.Error(), tag: "chain_too_large"}
	case errors.Is(err, carrier.ErrChainMalformed):
		return rejection{status: http.StatusBadRequest, code: "invalid_request", description: carrier.ErrChainMalformed.Error(), tag: "bad_chain_header"}
	case errors.Is(err, challenge.ErrStoreUnavailable):
		// The presentation's nonce or replay record could not be checked:
		// fail closed, and tell the client to retry.
		return rejection{status: http.StatusServiceUnavailable, code: "temporarily_unavailable", description: "presentation could not be checked",
			tag: "nonce_store_unavailable"}
	case errors.Is(err, identity.ErrUnavailable):
		return rejection{status: http.StatusInternalServerError, code: "server_error", description: identity.ErrUnavailable.Error(), tag: "edge_identity"}
	case errors.Is(err, vc.ErrStatusUnavailable):
		// The credential may be fine but its revocation status cannot be
		// read right now: the edge fails closed, and 503 tells the client
		// to retry rather than to fetch a new credential.
		return rejection{status: http.StatusServiceUnavailable, code: "temporarily_unavailable", description: vc.ErrStatusUnavailable.Error(),
			reason: "status_unavailable", tag: "status_unavailable"}
	case errors.Is(err, vc.ErrChainFetch):
		// An ancestor named by URL (chain_fetch) could not be fetched right
		// now: like a status list, fail closed with 503. The client may
		// retry, or present the ancestors itself.
		return rejection{status: http.StatusServiceUnavailable, code: "temporarily_unavailable", description: vc.ErrChainFetch.Error(),
			reason: "chain_fetch_failed", tag: "chain_fetch_failed"}
	case errors.Is(err, vc.ErrMissingScope):
		// Verified, but not allowed here: 403, and the scopes to ask for.
		reason := vc.Reason(err)
		return rejection{status: http.StatusForbidden, code: "insufficient_scope", description: vc.ErrMissingScope.Error(),
			reason: reason, scope: strings.Join(cfg.RequiredScopes, " "), challenge: true, tag: reason}
	}
	// Every other verification failure, including an issuer whose did:web
	// cannot be fetched right now, is a 401: the edge fails closed and the
	// client learns only the reason, not the details.
	desc := "credential invalid"
	for _, s := range vcSentinels {
		if errors.Is(err, s) {
			desc = s.Error()
			break
		}
	}
	reason := vc.Reason(err)
	return rejection{status: http.StatusUnauthorized, code: "invalid_token", description: desc, reason: reason, challenge: true, tag: reason}
}

// hostError maps a concern's failure that the host answers (an upstream
// the edge's own client could not reach) to an HTTPError; other errors
// (the route's own) pass unchanged.
func hostError(err error) error {
	var se *handshake.StatusError
	if errors.As(err, &se) {
		return httpError(se.Status, se.Err)
	}
	return err
}

// documentError maps a failure to serve one of the edge's documents to
// the status the host answers with.
func documentError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wellknown.ErrNoHost):
		return httpError(http.StatusBadRequest, err)
	default:
		return httpError(http.StatusInternalServerError, wellknown.ErrUnavailable)
	}
}

// withAudiences adds to a wrong_audience refusal the audiences the route
// accepts: the configured ones, else those of host, so that the client can
// ask for a credential naming one.
func (rej rejection) withAudiences(configured []string, host string) rejection {
	if rej.reason != vc.Reason(vc.ErrAudience) {
		return rej
	}
	rej.audiences = configured
	if len(rej.audiences) == 0 {
		rej.audiences = site.Audiences(host)
	}
	rej.description += "; this route accepts the audiences " + strings.Join(rej.audiences, ", ")
	return rej
}

// writeAnswer writes an answer a step decided on (edge/level3's handshake
// answers) as it is: its headers, its status, its body.
func writeAnswer(w http.ResponseWriter, a *level3.Answer) {
	if a == nil {
		return
	}
	hdr := w.Header()
	for k, v := range a.Header {
		hdr[k] = v
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}
