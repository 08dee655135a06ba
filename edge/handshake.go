package edge

import (
	"net/http"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/edge/admit"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The pipeline's side of the JSON-RPC handshake (docs/protocol/mcpi.md#level-3-the-handshake): the calls
// themselves are handshake.Calls; here the route hands them its parts and
// maps what they return.

// serveCall takes a POST on a handshake path.
func (l *level3) serveCall(w http.ResponseWriter, r *http.Request, next Next, chain []string) (bool, error) {
	body, err := carrier.ReadBody(w, r, l.cfg.MaxBodySize)
	if err != nil {
		return true, l.cfg.rejectionFor(err).refusal()
	}
	out, err := l.calls.Serve(w, r, next, body, chain)
	if out == handshake.Answered {
		return true, hostError(err)
	}
	if l.cfg.LegacyHandshake == LegacyPass && handshake.IsLegacyForm(body) {
		return l.passLegacy(w, r, next)
	}
	return false, nil
}

// newCalls builds the route's handshake.Calls from its parts; the
// functions read the route's state when called (tests swap sessions).
func (l *level3) newCalls(checks func(*http.Request, []string) ([]vc.CheckOption, error), identified func(*http.Request, *vc.Delegation), inject func(*http.Request, *vc.Delegation) error) *handshake.Calls {
	c := &handshake.Calls{
		Mode:            l.mode,
		Service:         l.service,
		HandshakeMethod: l.cfg.HandshakeMethod,
		VerifyMethod:    l.cfg.VerifyMethod,
		MaxBody:         l.cfg.MaxBodySize,
		ReservedPrefix:  admit.ReplayKeyPrefix,
		Checks:          checks,
		Identified:      identified,
		Inject:          inject,
		RemoveCarriers:  l.carriers.RemoveHeaders,
		Forward:         l.forwardCall,
		WriteJSON:       writeJSON,
		Recorder:        l.obs,
		Logger:          l.logger,
	}
	if l.mode == HandshakeProxy {
		c.Endpoints = func(r *http.Request, next handshake.Next) *handshake.Endpoints {
			return l.discovery.Endpoints(r, l.site.Host(r), next)
		}
		c.Bindings = routeBindings{l}
	}
	return c
}

// passLegacy forwards a legacy KYA handshake untouched, without identity,
// when it presents neither a credential nor an edge session
// (`legacy_handshake pass`). When it does present one, the regular path
// verifies it (and adds the identity) instead.
func (l *level3) passLegacy(w http.ResponseWriter, r *http.Request, next Next) (bool, error) {
	found, err := l.carriers.Find(w, r)
	if err != nil || len(found.Credentials) > 0 || (found.ForeignBearer && l.cfg.NonDelegationBearer == BearerReject) {
		return false, nil
	}
	if d, err := l.session(r); d != nil || err != nil {
		return false, nil
	}
	if c := l.logger.Check(zapcore.DebugLevel, "legacy KYA handshake passed through without a credential"); c != nil {
		c.Write(zap.String("path", r.URL.Path))
	}
	return true, next(w, r)
}
