package edge

import (
	"fmt"
	"net/http"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The pipeline's side of the JSON-RPC handshake (docs/protocol/mcpi.md#level-3-the-handshake): the calls
// themselves are handshake.Calls; here the route hands them its parts and
// maps what they return.

// serveHandshakeCall takes a POST on a handshake path.
func (h *Handler) serveHandshakeCall(w http.ResponseWriter, r *http.Request, next Next, chain []string) (bool, error) {
	body, err := carrier.ReadBody(w, r, h.MaxBodySize)
	if err != nil {
		return true, h.reject(w, r, err, nil)
	}
	out, err := h.l3.calls.Serve(w, r, next, body, chain)
	if out == handshake.Answered {
		return true, hostError(err)
	}
	if h.LegacyHandshake == LegacyPass && handshake.IsLegacyForm(body) {
		return h.passLegacy(w, r, next)
	}
	return false, nil
}

// newCalls builds the route's handshake.Calls from its parts; the
// functions read the route's state when called (tests swap sessions).
func (h *Handler) newCalls() *handshake.Calls {
	l := &h.l3
	c := &handshake.Calls{
		Mode:            l.mode,
		Service:         l.service,
		HandshakeMethod: h.HandshakeMethod,
		VerifyMethod:    h.VerifyMethod,
		MaxBody:         h.MaxBodySize,
		ReservedPrefix:  replayKeyPrefix,
		Checks:          h.verifyCallChecks,
		Identified:      h.setIdentity,
		Inject:          h.injectIdentity,
		RemoveCarriers:  h.carriers.RemoveHeaders,
		Forward:         h.forwardCall,
		WriteJSON:       writeJSON,
		Recorder:        h.obs,
		Logger:          h.logger,
	}
	if l.mode == HandshakeProxy {
		c.Endpoints = func(r *http.Request, next handshake.Next) *handshake.Endpoints {
			return l.discovery.Endpoints(r, h.serviceHost(r), next)
		}
		c.Bindings = routeBindings{l}
	}
	return c
}

// verifyCallChecks are the rules for the credential of a verify call:
// checksFor's, and the ancestors of a chained credential when the request
// carries them in the chain header (inside a presentation they need none).
// require_presentation is not among them: the signed challenge already
// proves the agent holds its key.
func (h *Handler) verifyCallChecks(r *http.Request, chain []string) ([]vc.CheckOption, error) {
	opts, err := h.withChain(h.checksFor(r), chain)
	if err != nil {
		// An unreadable chain leaves the credential unverifiable (-32004).
		return nil, fmt.Errorf("%w: %w", challenge.ErrUntrustedCredential, err)
	}
	return opts, nil
}

// passLegacy forwards a legacy KYA handshake untouched, without identity,
// when it presents neither a credential nor an edge session
// (`legacy_handshake pass`). When it does present one, the regular path
// verifies it (and adds the identity) instead.
func (h *Handler) passLegacy(w http.ResponseWriter, r *http.Request, next Next) (bool, error) {
	found, err := h.carriers.Find(w, r)
	if err != nil || len(found.Credentials) > 0 || (found.ForeignBearer && h.NonDelegationBearer == BearerReject) {
		return false, nil
	}
	if d, err := h.sessionDelegation(r); d != nil || err != nil {
		return false, nil
	}
	if c := h.logger.Check(zapcore.DebugLevel, "legacy KYA handshake passed through without a credential"); c != nil {
		c.Write(zap.String("path", r.URL.Path))
	}
	return true, next(w, r)
}
