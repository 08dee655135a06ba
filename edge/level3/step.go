// Package level3 is the Level 3 step of the edge: the JSON-RPC
// challenge-response handshake (docs/protocol/mcpi.md#level-3-the-handshake),
// answered at the edge (terminate) or checked and forwarded to the upstream
// (proxy), and the handshake sessions that later requests present instead
// of a credential. The mechanics are edge/handshake's; this step holds one
// route's parts and tells the handler what to do: it never writes a
// response, it returns a Result the handler writes.
package level3

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/edge/internal/reply"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/edge/wellknown"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Config is what the step enforces, with the route's defaults applied.
type Config struct {
	// Mode is handshake.Terminate or handshake.Proxy.
	Mode string
	// HandshakePath and VerifyPath are the edge's handshake paths.
	HandshakePath, VerifyPath string
	// HandshakeMethod and VerifyMethod name the JSON-RPC methods ("" for
	// the defaults).
	HandshakeMethod, VerifyMethod string
	ChallengeTTL, HandshakeSkew   time.Duration
	// SessionTTL bounds a session (terminate) or binding (proxy); ClockSkew
	// is the route's tolerance on the credential's dates.
	SessionTTL, ClockSkew time.Duration
	// LegacyPass forwards a legacy KYA handshake that presents neither a
	// credential nor a session, without identity.
	LegacyPass bool
	// RejectForeignBearer: an Authorization bearer that is no delegation
	// is refused on this route, so it does not count as "no credential".
	RejectForeignBearer bool
	// MaxBody bounds the handshake bodies read.
	MaxBody int64
	// Policy is the fingerprint of what decides, on this route, whether a
	// credential is accepted: it names the session key (terminate) and
	// scopes the session bindings (proxy).
	Policy string

	// The route's rules a session is held to on every use, as a credential
	// is (session.go).
	TrustedIssuers  []string
	Audiences       []string
	RequireAudience bool
	RequiredScopes  []string

	// Proxy mode: where the upstream's endpoints are.
	HandshakeEndpoint, VerifyEndpoint string
	UpstreamDID                       string
	// Upstream is the Level 2 upstream origin, or nil.
	Upstream           *url.URL
	DiscoveryTTL       time.Duration
	AllowPrivateDIDWeb bool
}

// Parts are what the step is given of the route, built before it.
type Parts struct {
	// Ctx lives as long as the route.
	Ctx context.Context
	// KeyStorage keeps the key sessions are signed with (terminate); nil:
	// a random key that lasts as long as this step.
	KeyStorage assertion.Storage
	// Store keeps issued challenges; the route's presentation replay guard
	// shares it.
	Store challenge.NonceStore
	// Binder keeps the upstream's session bindings (proxy mode, required).
	Binder   challenge.OwnedBinder
	Resolver didresolver.Resolver
	Verifier challenge.CredentialVerifier
	Site     *site.Site
	Carriers *carrier.Reader
	Recorder *observe.Recorder
	Logger   *zap.Logger

	// Checks returns the route's rules for a verify call's credential that
	// came with chain (its ancestors).
	Checks func(r *http.Request, chain []string) ([]vc.CheckOption, error)
	// Identified tells the host who was verified (nil: nobody listens).
	Identified func(r *http.Request, d *vc.Delegation)
	// Inject adds the identity headers for the upstream to a forwarded
	// verify (nil below Level 2).
	Inject func(r *http.Request, d *vc.Delegation) error
}

// Step is the Level 3 step of one route: it answers or proxies the
// handshake calls, and finds the delegation a handshake session stands
// for. It is safe for concurrent use.
type Step struct {
	cfg Config

	service *challenge.Service
	// calls takes the handshake and verify calls (handshake.Calls).
	calls *handshake.Calls

	sessions *handshake.Sessions

	// Proxy mode: where the upstream's endpoints are, and how calls reach
	// them.
	discovery *handshake.Discovery
	forwarder *handshake.Forwarder
	// bindings binds the upstream's handshake sessions (proxysession.go).
	bindings *handshake.Bindings

	site     *site.Site
	carriers *carrier.Reader
	logger   *zap.Logger
}

// New builds the step for cfg from the route's parts.
func New(cfg Config, p Parts) (*Step, error) {
	s := &Step{cfg: cfg, site: p.Site, carriers: p.Carriers, logger: p.Logger}
	opts := []challenge.Option{
		challenge.WithStore(p.Store),
		challenge.WithResolver(p.Resolver),
		challenge.WithCredentialVerifier(p.Verifier),
		challenge.WithChallengeTTL(cfg.ChallengeTTL),
		challenge.WithSkew(cfg.HandshakeSkew),
	}

	switch cfg.Mode {
	case handshake.Terminate:
		stored, err := s.sessionKey(p.Ctx, p.KeyStorage)
		if err != nil {
			return nil, fmt.Errorf("mcpi: handshake session key: %v", err)
		}
		key, err := handshake.DeriveKey(stored, cfg.Policy)
		if err != nil {
			return nil, fmt.Errorf("mcpi: handshake session key: %v", err)
		}
		ck, err := handshake.ChallengeKey(stored, cfg.Policy)
		if err != nil {
			return nil, fmt.Errorf("mcpi: handshake challenge key: %v", err)
		}
		s.sessions = handshake.NewSessions(key, cfg.SessionTTL).WithSkew(cfg.ClockSkew)
		opts = append(opts, challenge.WithSessionIssuer(routeSessions{s}), challenge.WithChallengeKey(ck))

	case handshake.Proxy:
		if p.Binder == nil {
			return nil, errors.New("mcpi: `handshake proxy` needs a nonce store that keeps handshake sessions (memory or redis)")
		}
		client := handshake.NewClient()
		guarded, err := didresolver.GuardedClient(client, cfg.AllowPrivateDIDWeb, handshake.Timeout)
		if err != nil {
			return nil, fmt.Errorf("mcpi: handshake client: %v", err)
		}
		s.forwarder = &handshake.Forwarder{Client: client, Guarded: guarded, ForwardedHeaders: forwardedToOrigins}
		dv := &handshake.Discovery{
			UpstreamDID: cfg.UpstreamDID,
			Resolver:    p.Resolver,
			Client:      client,
			Guarded:     guarded,
			Default:     handshake.Endpoints{Handshake: handshake.PathEndpoint(cfg.HandshakePath), Verify: handshake.PathEndpoint(cfg.VerifyPath)},
			TTL:         cfg.DiscoveryTTL,
			Logger:      p.Logger,
			Upstream:    cfg.Upstream,
		}
		if cfg.HandshakeEndpoint != "" {
			vf := cfg.VerifyEndpoint
			if vf == "" {
				vf = cfg.HandshakeEndpoint
			}
			hs, err1 := handshake.ParseEndpoint(cfg.HandshakeEndpoint)
			vfe, err2 := handshake.ParseEndpoint(vf)
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("mcpi: handshake endpoint: %v", err)
			}
			eps := &handshake.Endpoints{Handshake: hs, Verify: vfe, Source: "explicit"}
			dv.Explicit = eps.Localize(dv.Upstream)
		}
		s.discovery = dv
		s.bindings = handshake.NewBindings(p.Binder, cfg.Policy, cfg.SessionTTL).WithSkew(cfg.ClockSkew)

	default:
		return nil, fmt.Errorf("mcpi: handshake must be terminate or proxy, got %q", cfg.Mode)
	}

	svc, err := challenge.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("mcpi: handshake: %v", err)
	}
	s.service = svc
	s.calls = s.newCalls(p)
	return s, nil
}

// sessionKey returns the key the edge's session keys are derived from
// (handshake.DeriveKey): kept in Caddy's storage, so replicas that share
// storage (and the acceptance policy) accept each other's sessions and a
// restart keeps them valid. Without configured storage (a bare context, as
// in unit tests) a random key lives as long as this step.
func (s *Step) sessionKey(ctx context.Context, st assertion.Storage) ([]byte, error) {
	if st != nil {
		return handshake.LoadKey(ctx, st)
	}
	s.logger.Debug("no Caddy storage; handshake sessions are signed with a key that lasts until the next config load")
	key := make([]byte, handshake.SessionKeySize)
	_, err := rand.Read(key)
	return key, err
}

// Close releases the step's idle connections; it runs when the route is
// closed, also after a partial build.
func (s *Step) Close() error {
	if s == nil {
		return nil
	}
	if f := s.forwarder; f != nil {
		for _, c := range []*http.Client{f.Client, f.Guarded} {
			if c != nil {
				c.CloseIdleConnections()
			}
		}
	}
	return nil
}

// Document is the handshake part of the edge's /.well-known/mcp-i.json.
func (s *Step) Document() *wellknown.Handshake {
	return &wellknown.Handshake{HandshakePath: s.cfg.HandshakePath, VerifyPath: s.cfg.VerifyPath, Methods: s.service.SupportedMethods()}
}

// methodNotAllowed answers anything but a POST on a handshake path in
// terminate mode (in proxy mode the upstream decides).
var methodNotAllowed = []byte(`{"error":"method_not_allowed","error_description":"handshake endpoints take JSON-RPC over POST"}`)

// Serve takes handshake traffic (the handshake and verify paths, and the
// legacy KYA forms under legacy_handshake pass). It runs after the
// identity headers were stripped and before any credential is required.
// chain holds the values of the chain header, already taken off r: a
// verify call's credential may need its ancestors like any other. next is
// the rest of the route, which proxy mode forwards calls through (with a
// writer of its own); w is only for bounding the body read. The error is
// one the host answers: the upstream's, or a *handshake.StatusError.
func (s *Step) Serve(w http.ResponseWriter, r *http.Request, next handshake.Next, chain []string) (Result, error) {
	p := r.URL.Path
	switch {
	case p == s.cfg.HandshakePath || p == s.cfg.VerifyPath:
		if r.Method == http.MethodPost {
			return s.serveCall(w, r, next, chain)
		}
		if s.cfg.Mode == handshake.Terminate {
			a := newAnswer()
			a.Header().Set("Allow", http.MethodPost)
			reply.JSON(a, http.StatusMethodNotAllowed, methodNotAllowed, "no-store")
			return Result{Outcome: Answered, Answer: a.answer()}, nil
		}
	case s.cfg.LegacyPass && r.Method == http.MethodPost && carrier.WantsBody(r) && r.ContentLength <= s.cfg.MaxBody:
		// (A body announced as larger is no legacy handshake; Level 1
		// decides about it as it would without this setting.)
		body, err := carrier.ReadBody(w, r, s.cfg.MaxBody)
		if err != nil {
			return Result{Outcome: Refused, Err: err}, nil
		}
		if handshake.IsLegacyForm(body) {
			return s.passLegacy(w, r), nil
		}
	}
	return Result{}, nil
}

// Session returns the delegation bound to a handshake session presented
// by r (Mcp-Session-Id or X-Mcpi-Handshake-Session), or nil when r
// presents none: an edge-issued session in terminate mode, the upstream's
// session bound at its verify in proxy mode (proxysession.go). It is
// consulted only when the request carries no credential. Its error is a
// rejected session, answered like a rejected credential.
func (s *Step) Session(r *http.Request) (*vc.Delegation, error) {
	var d *vc.Delegation
	var err error
	switch {
	case s.sessions != nil:
		d, err = s.sessions.Lookup(r)
	case s.bindings != nil:
		d, err = s.bindings.Lookup(r)
	}
	if err != nil || d == nil {
		return nil, err
	}
	if err := s.checkSessionRoute(r, d); err != nil {
		return nil, err
	}
	return d, nil
}

// routeSessions issues sessions with the step's current Sessions, so that
// the challenge service issues with the very sessions the step checks
// them with (UseSessions may replace them).
type routeSessions struct{ s *Step }

func (rs routeSessions) IssueSession(ctx context.Context, d *vc.Delegation, agentDID string) (string, time.Time, error) {
	return rs.s.sessions.IssueSession(ctx, d, agentDID)
}

// SpendNonce spends a stateless challenge's nonce for a presentation by
// holder (challenge.Service.SpendNonce).
func (s *Step) SpendNonce(ctx context.Context, nonce, holder string) (bool, error) {
	return s.service.SpendNonce(ctx, nonce, holder)
}
