package edge

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/edge/wellknown"
	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"go.uber.org/zap"
)

// Level 3 defaults.
const (
	HandshakeTerminate = handshake.Terminate
	HandshakeProxy     = handshake.Proxy

	LegacyPass   = "pass"
	LegacyVerify = "verify"

	defaultHandshakePath = "/api/mcp/handshake"
	defaultVerifyPath    = "/api/mcp/verify"
	defaultDiscoveryTTL  = 5 * time.Minute
)

// Level3Config holds the Level 3 settings (the JSON-RPC challenge-response
// handshake, docs/protocol/mcpi.md#level-3-the-handshake). It is embedded in Config, so its fields are
// top-level JSON config fields of http.handlers.mcpi. They apply only at
// level 3; Validate refuses them at a lower level.
type Level3Config struct {
	// How the edge takes part in the handshake. "terminate": the edge
	// answers handshake and verify itself and issues an edge session that
	// later requests present instead of the credential. "proxy": the edge
	// forwards both to the upstream's handshake endpoints, records the
	// upstream's challenges in its nonce store on the way back, and checks
	// every verify (signature, single use, credential) before the upstream
	// sees it, adding the Level 2 identity headers. Default: terminate.
	Handshake string `json:"handshake,omitempty"`

	// Proxy mode: the upstream's handshake endpoint, a path on the
	// route's upstream (forwarded through the rest of the route, normally
	// reverse_proxy, with the path rewritten; so is a URL on the Level 2
	// `upstream` origin) or an absolute http(s) URL of another origin
	// (forwarded by the edge's own client). Unset: discovered from the
	// upstream's /.well-known/mcp-i.json (fetched from the Level 2
	// `upstream` origin when set, else through the route), else the
	// services of upstream_did's document, else the edge's own handshake
	// paths on the route's upstream.
	HandshakeEndpoint string `json:"handshake_endpoint,omitempty"`
	// Proxy mode: the upstream's verify endpoint, as handshake_endpoint.
	// Default: handshake_endpoint when that is set (one JSON-RPC endpoint
	// for both methods).
	VerifyEndpoint string `json:"verify_endpoint,omitempty"`
	// Proxy mode: DID of the upstream; its document's services of type
	// mcp-i or JSON-RPC name the endpoints when /.well-known/mcp-i.json
	// does not.
	UpstreamDID string `json:"upstream_did,omitempty"`
	// Proxy mode: how long discovered endpoints are cached. Default: 5m.
	DiscoveryTTL duration.Duration `json:"discovery_ttl,omitempty"`

	// Path at which the edge takes handshake calls. Default:
	// /api/mcp/handshake.
	HandshakePath string `json:"handshake_path,omitempty"`
	// Path at which the edge takes verify calls. Default: /api/mcp/verify.
	// Either path takes either method; the JSON-RPC method decides.
	VerifyPath string `json:"verify_path,omitempty"`
	// JSON-RPC method name of the handshake call. Default: handshake.
	HandshakeMethod string `json:"handshake_method,omitempty"`
	// JSON-RPC method name of the verify call. Default: verify.
	VerifyMethod string `json:"verify_method,omitempty"`

	// Lifetime of a challenge. Default: 5m.
	ChallengeTTL duration.Duration `json:"challenge_ttl,omitempty"`
	// Tolerated difference between the signed timestamp and the edge's
	// clock. Default: 2m.
	HandshakeSkew duration.Duration `json:"handshake_skew,omitempty"`
	// Lifetime of a handshake session, never beyond the credential's
	// expiry. Terminate mode: of the edge's session token. Proxy mode: of
	// the edge's binding of the upstream's session id to the verified
	// delegation (never beyond the upstream's expiresAt either). Default:
	// 15m.
	SessionTTL duration.Duration `json:"session_ttl,omitempty"`

	// The older KYA handshake forms (JSON-RPC handshake with {nonce,
	// audience, timestamp, agentDid}, tools/call of _mcpi_handshake,
	// _kyaos_handshake or _mcpi) are always forwarded untouched.
	// "verify": like any request, they need a credential or an edge
	// session. "pass": without either, they are forwarded anyway, with no
	// identity (this is how a KYA agent obtains its credential). Default:
	// verify.
	LegacyHandshake string `json:"legacy_handshake,omitempty"`
}

// level3 is the Level 3 step of the pipeline: it answers or proxies the
// handshake calls, and finds the delegation a handshake session stands
// for. It is built by provisionLevel3 and knows the route only through
// the fields below.
type level3 struct {
	enabled bool
	mode    string
	// hsPath and vfPath are the edge's handshake paths.
	hsPath, vfPath string

	service *challenge.Service
	// calls takes the handshake and verify calls (handshake.Calls).
	calls *handshake.Calls
	// store keeps issued challenges; the verifier's replay guard shares it
	// (delegation.go). It is the loaded store wrapped in a
	// measuredNonceStore.
	store    challenge.NonceStore
	resolver didresolver.Resolver

	// policy is acceptancePolicy's fingerprint: it names the session key
	// (terminate) and scopes the session bindings (proxy).
	policy   string
	sessions *handshake.Sessions

	// Proxy mode: where the upstream's endpoints are, and how calls reach
	// them.
	discovery *handshake.Discovery
	forwarder *handshake.Forwarder

	// proxySessions binds the upstream's handshake sessions
	// (proxysession.go).
	proxySessions *handshake.Bindings

	// What the step reads of the route, set when it is built: the
	// configuration (read-only from then on) and the route's parts.
	cfg      *Config
	site     *site.Site
	carriers *carrier.Reader
	logger   *zap.Logger
	obs      *observe.Recorder
}

// provisionNonceStore sets up h.l3.store: the store given to New, else
// one of the handler's own. It runs before the verifier is built, which
// uses the store as its replay guard, and before provisionLevel3.
func (h *Handler) provisionNonceStore() {
	s, name := h.nonceStore, h.nonceStoreName
	if s == nil {
		h.ownStore = challenge.NewMemoryStore(h.ctx, challenge.WithMaxEntries(challenge.DefaultMemoryMaxEntries))
		s, name = h.ownStore, "memory"
	}
	if name == "" {
		name = "other"
	}
	// Measured as the store's name ("memory", "redis").
	h.l3.store = &measuredNonceStore{store: s, name: name, obs: h.obs}
}

// provisionLevel3 runs at the end of Provision (after provisionLevel2),
// with the store that provisionNonceStore loaded.
func (h *Handler) provisionLevel3() error {
	if h.cfg.Level < 3 {
		return nil
	}
	l := &h.l3
	l.enabled = true
	l.cfg, l.site, l.carriers, l.logger, l.obs = &h.cfg, h.site, h.carriers, h.logger, h.obs
	l.mode = h.cfg.Handshake
	if l.mode == "" {
		l.mode = HandshakeTerminate
	}
	l.hsPath, l.vfPath = h.cfg.HandshakePath, h.cfg.VerifyPath
	if l.hsPath == "" {
		l.hsPath = defaultHandshakePath
	}
	if l.vfPath == "" {
		l.vfPath = defaultVerifyPath
	}
	if h.cfg.ChallengeTTL == 0 {
		h.cfg.ChallengeTTL = Duration(challenge.DefaultChallengeTTL)
	}
	if h.cfg.HandshakeSkew == 0 {
		h.cfg.HandshakeSkew = Duration(challenge.DefaultSkew)
	}
	if h.cfg.LegacyHandshake == "" {
		h.cfg.LegacyHandshake = LegacyVerify
	}
	if h.cfg.SessionTTL == 0 {
		h.cfg.SessionTTL = Duration(handshake.DefaultSessionTTL)
	}

	// The agent DIDs resolve through the handler's DID cache.
	l.resolver = observe.TraceResolver(h.didCache)
	l.policy = h.cfg.acceptancePolicy()

	opts := []challenge.Option{
		challenge.WithStore(l.store),
		challenge.WithResolver(l.resolver),
		challenge.WithCredentialVerifier(h.verifier),
		challenge.WithChallengeTTL(time.Duration(h.cfg.ChallengeTTL)),
		challenge.WithSkew(time.Duration(h.cfg.HandshakeSkew)),
	}

	switch l.mode {
	case HandshakeTerminate:
		stored, err := l.sessionKey(h.ctx, h.keyStorage)
		if err != nil {
			return fmt.Errorf("mcpi: handshake session key: %v", err)
		}
		key, err := handshake.DeriveKey(stored, l.policy)
		if err != nil {
			return fmt.Errorf("mcpi: handshake session key: %v", err)
		}
		ck, err := handshake.ChallengeKey(stored, l.policy)
		if err != nil {
			return fmt.Errorf("mcpi: handshake challenge key: %v", err)
		}
		l.sessions = handshake.NewSessions(key, time.Duration(h.cfg.SessionTTL)).WithSkew(time.Duration(h.cfg.ClockSkew))
		opts = append(opts, challenge.WithSessionIssuer(routeSessions{l}), challenge.WithChallengeKey(ck))

	case HandshakeProxy:
		if h.cfg.DiscoveryTTL == 0 {
			h.cfg.DiscoveryTTL = Duration(defaultDiscoveryTTL)
		}
		client := handshake.NewClient()
		guarded, err := didresolver.GuardedClient(client, h.cfg.AllowPrivateDIDWeb, handshake.Timeout)
		if err != nil {
			return fmt.Errorf("mcpi: handshake client: %v", err)
		}
		l.forwarder = &handshake.Forwarder{Client: client, Guarded: guarded, ForwardedHeaders: forwardedToOrigins}
		dv := &handshake.Discovery{
			UpstreamDID: h.cfg.UpstreamDID,
			Resolver:    l.resolver,
			Client:      client,
			Guarded:     guarded,
			Default:     handshake.Endpoints{Handshake: handshake.PathEndpoint(l.hsPath), Verify: handshake.PathEndpoint(l.vfPath)},
			TTL:         time.Duration(h.cfg.DiscoveryTTL),
			Logger:      h.logger,
		}
		if h.cfg.Upstream != "" {
			// Level 2's upstream origin (validated there).
			u, err := ParseUpstreamOrigin(h.cfg.Upstream)
			if err != nil {
				return err
			}
			dv.Upstream = u
		}
		if h.cfg.HandshakeEndpoint != "" {
			vf := h.cfg.VerifyEndpoint
			if vf == "" {
				vf = h.cfg.HandshakeEndpoint
			}
			hs, err1 := handshake.ParseEndpoint(h.cfg.HandshakeEndpoint)
			vfe, err2 := handshake.ParseEndpoint(vf)
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("mcpi: handshake endpoint: %v", err)
			}
			eps := &handshake.Endpoints{Handshake: hs, Verify: vfe, Source: "explicit"}
			dv.Explicit = eps.Localize(dv.Upstream)
		}
		l.discovery = dv
		binder, err := h.l3.proxySessionBinder()
		if err != nil {
			return err
		}
		l.proxySessions = handshake.NewBindings(binder, l.policy, time.Duration(h.cfg.SessionTTL)).WithSkew(time.Duration(h.cfg.ClockSkew))
	}

	svc, err := challenge.New(opts...)
	if err != nil {
		return fmt.Errorf("mcpi: handshake: %v", err)
	}
	l.service = svc
	l.calls = l.newCalls(h.admit.CallChecks, h.setIdentity, h.injectIdentity)
	return nil
}

// sessionKey returns the key the edge's session keys are derived from
// (handshake.DeriveKey): kept in Caddy's storage, so replicas that share
// storage (and the acceptance policy) accept each other's sessions and a
// restart keeps them valid. Without configured storage (a bare context, as
// in unit tests) a random key lives as long as this handler.
func (l *level3) sessionKey(ctx context.Context, st assertion.Storage) ([]byte, error) {
	if st != nil {
		return handshake.LoadKey(ctx, st)
	}
	l.logger.Debug("no Caddy storage; handshake sessions are signed with a key that lasts until the next config load")
	key := make([]byte, handshake.SessionKeySize)
	_, err := rand.Read(key)
	return key, err
}

// validateLevel3 runs from Validate. Like Validate, it works on an
// unprovisioned Handler.
func (cfg *Config) validateLevel3() error {
	c := &cfg.Level3Config
	if cfg.Level < 3 {
		if c.Handshake != "" || c.HandshakeEndpoint != "" || c.VerifyEndpoint != "" ||
			c.UpstreamDID != "" || c.DiscoveryTTL != 0 || c.HandshakePath != "" || c.VerifyPath != "" ||
			c.HandshakeMethod != "" || c.VerifyMethod != "" ||
			c.ChallengeTTL != 0 || c.HandshakeSkew != 0 || c.SessionTTL != 0 || c.LegacyHandshake != "" {
			return errors.New("mcpi: handshake settings need `level 3`")
		}
		return nil
	}
	mode := c.Handshake
	switch mode {
	case "":
		mode = HandshakeTerminate
	case HandshakeTerminate, HandshakeProxy:
	default:
		return fmt.Errorf("mcpi: handshake must be terminate or proxy, got %q", c.Handshake)
	}
	if mode == HandshakeTerminate {
		if c.HandshakeEndpoint != "" || c.VerifyEndpoint != "" || c.UpstreamDID != "" || c.DiscoveryTTL != 0 {
			return errors.New("mcpi: handshake endpoints, upstream_did and discovery_ttl apply to `handshake proxy`")
		}
	}
	if c.VerifyEndpoint != "" && c.HandshakeEndpoint == "" {
		return errors.New("mcpi: verify_endpoint needs handshake_endpoint")
	}
	for _, e := range []string{c.HandshakeEndpoint, c.VerifyEndpoint} {
		if e == "" {
			continue
		}
		if _, err := handshake.ParseEndpoint(e); err != nil {
			return fmt.Errorf("mcpi: handshake endpoint %q: %v", e, err)
		}
	}
	if c.UpstreamDID != "" {
		if _, err := didresolver.ParseDID(c.UpstreamDID); err != nil {
			return fmt.Errorf("mcpi: upstream_did %q: %v", c.UpstreamDID, err)
		}
	}
	hs, vf := c.HandshakePath, c.VerifyPath
	if hs == "" {
		hs = defaultHandshakePath
	}
	if vf == "" {
		vf = defaultVerifyPath
	}
	for _, p := range []string{hs, vf} {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# \t") {
			return fmt.Errorf("mcpi: handshake path %q must be an absolute path", p)
		}
		if p == wellknown.WellKnownMCPI || site.IsResourceMetadataPath(p) {
			return fmt.Errorf("mcpi: handshake path %q is reserved", p)
		}
	}
	if hs == vf {
		return errors.New("mcpi: handshake and verify paths must differ")
	}
	hm, vm := c.HandshakeMethod, c.VerifyMethod
	if hm == "" {
		hm = challenge.DefaultHandshakeMethod
	}
	if vm == "" {
		vm = challenge.DefaultVerifyMethod
	}
	if hm == vm {
		return errors.New("mcpi: handshake and verify methods must differ")
	}
	if c.ChallengeTTL < 0 || c.HandshakeSkew < 0 || c.SessionTTL < 0 || c.DiscoveryTTL < 0 {
		return errors.New("mcpi: durations must not be negative")
	}
	if c.ChallengeTTL != 0 && time.Duration(c.ChallengeTTL) < time.Second {
		return errors.New("mcpi: challenge_ttl must be at least 1s")
	}
	switch c.LegacyHandshake {
	case "", LegacyPass, LegacyVerify:
	default:
		return fmt.Errorf("mcpi: legacy_handshake must be pass or verify, got %q", c.LegacyHandshake)
	}
	return nil
}

// close runs from Cleanup, also after a partial Provision.
func (l *level3) close() error {
	if f := l.forwarder; f != nil {
		for _, c := range []*http.Client{f.Client, f.Guarded} {
			if c != nil {
				c.CloseIdleConnections()
			}
		}
	}
	return nil
}

// serve answers or proxies handshake traffic (the handshake/verify
// endpoints, /.well-known/mcp-i.json) and reports whether it did. Runs after
// the identity headers were stripped and before any credential is required.
// chain holds the values of the chain header, already taken off r: a
// verify call's credential may need its ancestors like any other.
func (l *level3) serve(w http.ResponseWriter, r *http.Request, next Next, chain []string) (handled bool, err error) {
	if !l.enabled {
		return false, nil
	}
	p := r.URL.Path
	switch {
	case p == l.hsPath || p == l.vfPath:
		if r.Method == http.MethodPost {
			return l.serveCall(w, r, next, chain)
		}
		if l.mode == HandshakeTerminate {
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, http.StatusMethodNotAllowed, []byte(`{"error":"method_not_allowed","error_description":"handshake endpoints take JSON-RPC over POST"}`), "no-store")
			return true, nil
		}
	case l.cfg.LegacyHandshake == LegacyPass && r.Method == http.MethodPost && carrier.WantsBody(r) && r.ContentLength <= l.cfg.MaxBodySize:
		// (A body announced as larger is no legacy handshake; Level 1
		// decides about it as it would without this setting.)
		body, err := carrier.ReadBody(w, r, l.cfg.MaxBodySize)
		if err != nil {
			return true, l.cfg.rejectionFor(err).refusal()
		}
		if handshake.IsLegacyForm(body) {
			return l.passLegacy(w, r, next)
		}
	}
	return false, nil
}

// session returns the delegation bound to a handshake session
// presented by r (Mcp-Session-Id or X-Mcpi-Handshake-Session), or nil when
// r presents none: an edge-issued session in terminate mode, the
// upstream's session bound at its verify in proxy mode (proxysession.go).
// It is consulted only when the request carries no credential.
func (l *level3) session(r *http.Request) (*vc.Delegation, error) {
	if !l.enabled {
		return nil, nil
	}
	// A rejected session is logged by reject, like a credential.
	switch {
	case l.sessions != nil:
		return l.sessionFrom(r)
	case l.proxySessions != nil:
		return l.boundSession(r)
	}
	return nil, nil
}

// spendNonce spends a stateless challenge's nonce for a presentation
// (challenge.Service.SpendNonce); the service is built after admission.
func (l *level3) spendNonce(ctx context.Context, nonce, holder string) (bool, error) {
	if l.service == nil {
		return false, nil
	}
	return l.service.SpendNonce(ctx, nonce, holder)
}

// routeSessions issues sessions with the route's current Sessions, so that
// the challenge service issues with the very sessions the route checks
// them with (tests swap them for a shared key or a later clock).
type routeSessions struct{ l *level3 }

func (s routeSessions) IssueSession(ctx context.Context, d *vc.Delegation, agentDID string) (string, time.Time, error) {
	return s.l.sessions.IssueSession(ctx, d, agentDID)
}

// ValidEndpoint checks a handshake_endpoint or verify_endpoint setting: a
// path, or an absolute http(s) URL.
func ValidEndpoint(s string) error {
	_, err := handshake.ParseEndpoint(s)
	return err
}
