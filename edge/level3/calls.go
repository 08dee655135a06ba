package level3

import (
	"net/http"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/edge/admit"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/edge/internal/reply"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The route's side of the JSON-RPC handshake (docs/protocol/mcpi.md#level-3-the-handshake): the calls
// themselves are handshake.Calls; here the step hands them its parts and
// turns what they write and return into a Result.

// serveCall takes a POST on a handshake path.
func (s *Step) serveCall(w http.ResponseWriter, r *http.Request, next handshake.Next, chain []string) (Result, error) {
	body, err := carrier.ReadBody(w, r, s.cfg.MaxBody)
	if err != nil {
		return Result{Outcome: Refused, Err: err}, nil
	}
	aw := newAnswer()
	out, err := s.calls.Serve(aw, r, next, body, chain)
	if out == handshake.Answered {
		if err != nil {
			// The host answers; nothing was written.
			return Result{}, err
		}
		return Result{Outcome: Answered, Answer: aw.answer()}, nil
	}
	if s.cfg.LegacyPass && handshake.IsLegacyForm(body) {
		return s.passLegacy(w, r), nil
	}
	return Result{}, nil
}

// newCalls builds the route's handshake.Calls from its parts; the
// functions read the step's state when called (UseSessions, UseBindings).
func (s *Step) newCalls(p Parts) *handshake.Calls {
	identified := func(r *http.Request, d *vc.Delegation) {
		if p.Identified != nil && d != nil {
			p.Identified(r, d)
		}
	}
	inject := p.Inject
	if inject == nil {
		inject = func(*http.Request, *vc.Delegation) error { return nil }
	}
	c := &handshake.Calls{
		Mode:            s.cfg.Mode,
		Service:         s.service,
		HandshakeMethod: s.cfg.HandshakeMethod,
		VerifyMethod:    s.cfg.VerifyMethod,
		MaxBody:         s.cfg.MaxBody,
		ReservedPrefix:  admit.ReplayKeyPrefix,
		Checks:          p.Checks,
		Identified:      identified,
		Inject:          inject,
		RemoveCarriers:  s.carriers.RemoveHeaders,
		Forward:         s.forwardCall,
		WriteJSON:       reply.JSON,
		Recorder:        p.Recorder,
		Logger:          s.logger,
	}
	if s.cfg.Mode == handshake.Proxy {
		c.Endpoints = func(r *http.Request, next handshake.Next) *handshake.Endpoints {
			return s.discovery.Endpoints(r, s.site.Host(r), next)
		}
		c.Bindings = routeBindings{s}
	}
	return c
}

// passLegacy hands on a legacy KYA handshake untouched, without identity,
// when it presents neither a credential nor an edge session
// (`legacy_handshake pass`). When it does present one, the regular path
// verifies it (and adds the identity) instead.
func (s *Step) passLegacy(w http.ResponseWriter, r *http.Request) Result {
	found, err := s.carriers.Find(w, r)
	if err != nil || len(found.Credentials) > 0 || (found.ForeignBearer && s.cfg.RejectForeignBearer) {
		return Result{}
	}
	if d, err := s.Session(r); d != nil || err != nil {
		return Result{}
	}
	if c := s.logger.Check(zapcore.DebugLevel, "legacy KYA handshake passed through without a credential"); c != nil {
		c.Write(zap.String("path", r.URL.Path))
	}
	return Result{Outcome: PassOn}
}
