// Package edge is the MCP-I identity edge as plain net/http middleware: it
// admits a request only when it carries a verified delegation (Level 1),
// tells MCP-I-aware upstreams who is calling (Level 2), answers or checks
// the challenge-response handshake (Level 3), and applies the per-tool
// policy of MCP. It knows nothing of Caddy: caddymodule adapts it, and a Go
// server can use it directly (Wrap).
package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/admit"
	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/edge/framing"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/level3"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/proofstep"
	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/edge/toolpolicy"
	"github.com/mcpi-edge/caddy-mcpi/edge/wellknown"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/cache"
	"time"
)

// Next hands a request on: the rest of the route. Its error is returned by
// ServeNext unchanged, so a host's error handling still sees it.
type Next func(http.ResponseWriter, *http.Request) error

// Hooks tell the edge what only the host knows. Every hook is optional.
type Hooks struct {
	// Identity receives every verified delegation the edge admits a
	// request with (not anonymous admissions), before the request goes
	// on: Caddy turns it into placeholders.
	Identity func(r *http.Request, d *vc.Delegation)
	// RequestID is the host's id of the request, for the audit log.
	RequestID func(r *http.Request) string
	// ClientIP is the client's address as the host established it
	// (trusted proxies applied), for the audit log.
	ClientIP func(r *http.Request) string
	// TrustedProxy reports that r came through a proxy the host trusts,
	// whose X-Forwarded-Proto then names the scheme the client used.
	TrustedProxy func(r *http.Request) bool
	// Original is the method and URL of the request as the client sent
	// it, before the host rewrote its path (Caddy's handle_path): the edge
	// advertises and logs the client's paths. A nil URL (or no hook): r is
	// as the client sent it.
	Original func(r *http.Request) (method string, u *url.URL)
	// UpstreamHeader reads a header of the upstream's response once the
	// request is over (Caddy: {http.reverse_proxy.header.*}). It is called
	// after the request's context is done. Nil: `upstream_mcpi auto`
	// learns from the upstream's /.well-known/mcp-i.json alone, not from
	// an MCP-I-Version response header.
	UpstreamHeader func(r *http.Request, name string) (string, bool)
	// SignedInUser is the subject the host's own authentication
	// established for r (Caddy: {http.auth.user.id} of basic_auth,
	// forward_auth, …), "" when nobody is signed in. The front door's
	// consent page acts for this user; it never reads a client's header.
	SignedInUser func(r *http.Request) string
}

// Option configures New with what the host provides.
type Option func(*Handler)

// WithLogger sets the logger; the audit log is its child "audit". Default:
// a no-op logger.
func WithLogger(l *zap.Logger) Option { return func(h *Handler) { h.logger = l } }

// WithMetrics registers the edge's collectors in reg (collectors already
// registered there are reused). Default: no metrics.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(h *Handler) { h.registerer = reg }
}

// WithKeyStorage keeps the edge's signing keys (Level 2) and its session
// key (Level 3 terminate) in st, shared by every replica using it.
// Default: keys generated in memory, lost on restart and not shared.
func WithKeyStorage(st assertion.Storage) Option { return func(h *Handler) { h.keyStorage = st } }

// WithNonceStore keeps Level 3 challenges, presentation nonces and proxy
// session bindings in s (name labels its metrics: "memory", "redis").
// Default: a bounded in-memory store owned by the handler.
func WithNonceStore(s challenge.NonceStore, name string) Option {
	return func(h *Handler) { h.nonceStore, h.nonceStoreName = s, name }
}

// WithDIDResolver resolves DIDs through c, shared with other handlers.
// Default: a resolver and cache of the handler's own, built from Config.
func WithDIDResolver(c *didresolver.Cache) Option { return func(h *Handler) { h.didCache = c } }

// WithHooks sets the host's hooks.
func WithHooks(hk Hooks) Option { return func(h *Handler) { h.hooks = hk } }

// Handler is the edge for one configuration. It is safe for concurrent
// use; Close releases what New started.
type Handler struct {
	// cfg is the configuration New was given, with its defaults; it does
	// not change while the handler lives.
	cfg Config

	hooks Hooks
	// site derives the names the edge answers r under (edge/site).
	site *site.Site
	// docs are the documents the edge serves (edge/wellknown).
	docs *wellknown.Documents

	ident *identity.Identity // nil below level 2
	l3    *level3.Step       // nil below level 3
	// policy is the tool policy step (edge/toolpolicy).
	policy *toolpolicy.Policy
	// limiter counts the rate limits; nil without them (ratelimits.go).
	limiter *ratelimit.Limiter
	obs     *observe.Recorder
	// proofs is the KYA-OS step: declarations, request and response proofs.
	proofs *proofstep.Step
	// dpop checks the proofs of DPoP-bound credentials (boundcredential.go).
	dpop *dpop.Checker
	// front is the authorization server (frontdoor.go); nil when off.
	front *authserver.Server

	logger *zap.Logger
	// consent is where the route's prompts send the user (agentconsent.go).
	consent  *agentConsent
	verifier admit.Verifier
	carriers *carrier.Reader
	// framing reads the body once and checks the MCP framing headers.
	framing *framing.Framing
	// admit is the admission step: every credential's one verification.
	admit *admit.Admission
	// httpOrigin and httpsOrigin cache upstreamName's origins
	// (observability.go).
	httpOrigin, httpsOrigin site.LastDerived

	registerer     prometheus.Registerer
	keyStorage     assertion.Storage
	didCache       *didresolver.Cache
	nonceStore     challenge.NonceStore
	nonceStoreName string
	// nonces is the nonce store in use, measured (provisionNonceStore):
	// Level 3's challenges, the presentation nonces and replay guard, DPoP
	// proofs' jti.
	nonces challenge.NonceStore
	// ownStore is the default nonce store, closed by Close.
	ownStore *challenge.MemoryStore

	// ctx lives until Close: background work (key reloads, probes) ends
	// with it.
	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
}

// New checks cfg, applies its defaults and builds the edge.
func New(cfg Config, opts ...Option) (*Handler, error) {
	h := &Handler{cfg: cfg}
	for _, o := range opts {
		o(h)
	}
	if err := h.init(); err != nil {
		return nil, err
	}
	return h, nil
}

// init builds h from its Config and options; on failure it releases what
// it started.
func (h *Handler) init() error {
	if h.logger == nil {
		h.logger = zap.NewNop()
	}
	h.site = site.New(h.hooks.Original, h.hooks.TrustedProxy)
	if err := h.cfg.Validate(); err != nil {
		return err
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if err := h.build(); err != nil {
		_ = h.Close()
		return err
	}
	return nil
}

// build applies the defaults and builds every part, in dependency order.
func (h *Handler) build() error {
	h.cfg.applyDefaults()
	// Filled in last; Level 2's did.json asks it for the handshake's
	// service entries.
	h.docs = &wellknown.Documents{Site: h.site}
	if err := h.provisionObservability(); err != nil {
		return err
	}
	enabled, err := carrier.ParseSet(h.cfg.Carriers)
	if err != nil {
		return err
	}
	h.carriers = carrier.New(carrier.Config{Enabled: enabled, MaxBody: h.cfg.MaxBodySize, Passthrough: h.cfg.PassthroughCredential})

	if h.didCache == nil {
		res := didresolver.New(
			didresolver.WithTimeout(time.Duration(h.cfg.DIDWebTimeout)),
			didresolver.WithAllowPrivateAddresses(h.cfg.AllowPrivateDIDWeb),
			didresolver.WithAllowHTTP(h.cfg.AllowPrivateDIDWeb),
		)
		h.didCache = didresolver.NewCache(res, didresolver.WithTTL(time.Duration(h.cfg.DIDCacheTTL)))
	}

	// The Level 3 nonce store is also the verifier's replay guard.
	h.provisionNonceStore()
	h.provisionDPoP()
	store := h.nonceStore // as given: the front door keeps records in it
	if store == nil {
		store = h.ownStore
	}
	front, err := newFrontDoor(h.ctx, &h.cfg, frontDoorParts{site: h.site, signedIn: h.hooks.SignedInUser, store: store,
		keys: h.keyStorage, dpop: h.dpop, obs: h.obs, logger: h.logger})
	if err != nil {
		return err
	}
	h.front = front
	h.consent = &agentConsent{consentURL: h.cfg.ConsentURL, front: front, site: h.site}
	more, err := h.delegationOptions()
	if err != nil {
		return err
	}
	more = append(more, frontDoorOptions(h.front, &h.cfg)...)
	// Trust is always given, so that a config that somehow skipped
	// Validate trusts no issuer rather than every issuer.
	h.verifier = h.withVerificationCache(vc.NewVerifier(verifierResolver(h.front, h.didCache), append([]vc.Option{
		vc.WithClockSkew(time.Duration(h.cfg.ClockSkew)),
		vc.WithMaxSize(int(h.cfg.MaxCredentialSize)),
		vc.WithTrustedIssuers(h.cfg.TrustedIssuers...),
		vc.WithTrace(observe.StartVerify),
	}, append(more, h.cfg.lifetimeOptions()...)...)...))

	// Admission: at Level 3 presentation nonces are challenges of the
	// nonce store; with the front door, its revocations count.
	parts := admit.Parts{Site: h.site, Verifier: h.verifier, Measure: h.obs.Verification, DPoP: h.dpop}
	if h.cfg.Level >= 3 {
		parts.Nonces = h.nonces
		// The Level 3 step is built after admission: a presentation spends
		// its handshake nonce through the step as it is then.
		parts.SpendChallenge = func(ctx context.Context, nonce, holder string) (bool, error) {
			if h.l3 == nil {
				return false, nil
			}
			return h.l3.SpendNonce(ctx, nonce, holder)
		}
	}
	if h.front != nil {
		parts.Revoked = grantRevoked(h.front)
	}
	h.admit = newAdmission(&h.cfg, parts)
	if err := h.provisionIdentity(); err != nil {
		return err
	}
	if err := h.provisionLevel3(); err != nil {
		return err
	}
	h.provisionProofs()
	h.provisionDocuments()
	if err := h.provisionRateLimits(); err != nil {
		return err
	}
	if err := h.provisionPolicy(); err != nil {
		return err
	}
	// Framing reads the body strictly where the policy, the rate limits
	// or the proof step decide on it.
	readsBody, proofs := h.policy.ReadsBody(), h.proofs.Gate()
	h.framing = &framing.Framing{
		MaxBody:        h.cfg.MaxBodySize,
		DecidesOnBody:  func(raw []byte) bool { return readsBody || proofs.RequiresExtension() || proofs.Inspects(raw) },
		AmbiguousProof: proofs.AmbiguousProof,
		ParamHeaders:   h.policy.CheckParamHeaders,
	}
	return nil
}

// applyDefaults fills in what the config left at zero.
func (cfg *Config) applyDefaults() {
	if cfg.Level == 0 {
		cfg.Level = DefaultLevel
	}
	if cfg.NonDelegationBearer == "" {
		cfg.NonDelegationBearer = BearerPass
	}
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = Duration(DefaultClockSkew)
	}
	if cfg.MaxCredentialSize == 0 {
		cfg.MaxCredentialSize = DefaultMaxCredentialSize
	}
	if cfg.MaxBodySize == 0 {
		cfg.MaxBodySize = DefaultMaxBodySize
	}
	if cfg.DIDCacheTTL == 0 {
		cfg.DIDCacheTTL = Duration(DefaultDIDCacheTTL)
	}
	if cfg.DIDWebTimeout == 0 {
		cfg.DIDWebTimeout = Duration(DefaultDIDWebTimeout)
	}
}

// lifetimeOptions are the verifier's rules on a credential's validity span.
func (cfg *Config) lifetimeOptions() []vc.Option {
	var opts []vc.Option
	if cfg.AllowEndlessCredentials {
		opts = append(opts, vc.WithAllowNoExpiry())
	}
	if cfg.MaxCredentialLifetime > 0 {
		opts = append(opts, vc.WithMaxLifetime(time.Duration(cfg.MaxCredentialLifetime)))
	}
	return opts
}

// withVerificationCache puts the verified-delegation cache around v
// (unless it is off) and counts its hits and misses.
func (h *Handler) withVerificationCache(v *vc.Verifier) admit.Verifier {
	size := h.cfg.VerificationCacheSize
	switch {
	case size < 0:
		return v
	case size == 0:
		size = DefaultVerificationCache
	}
	return cache.New(v, size, cache.WithObserver(func(hit bool) { h.obs.Cache("delegation", hit) }))
}

// Wrap returns next behind the edge, for a plain net/http server. An error
// of the edge's own (a handshake upstream that failed) answers with its
// status; rejections are written by the edge itself.
func (h *Handler) Wrap(inner http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h.ServeNext(w, r, func(w http.ResponseWriter, r *http.Request) error {
			inner.ServeHTTP(w, r)
			return nil
		})
		if err != nil {
			status := http.StatusInternalServerError
			var he *HTTPError
			if errors.As(err, &he) {
				status = he.Status
			}
			http.Error(w, http.StatusText(status), status)
		}
	})
}

// Close stops the background work and releases what the handler owns. It
// is safe to call more than once, and after a failed New.
func (h *Handler) Close() error {
	var err error
	h.closeOnce.Do(func() {
		if h.cancel != nil {
			h.cancel()
		}
		err = errors.Join(h.l3.Close(), h.closeIdentity())
		if h.ownStore != nil {
			err = errors.Join(err, h.ownStore.Close())
		}
		// Last: the parts above may still record decisions.
		err = errors.Join(err, h.obs.Close())
	})
	return err
}

// HTTPError is an error of the edge that carries the HTTP status it should
// be answered with (a handshake upstream that could not be reached: 502).
// Rejections of a request are written by the edge, never returned.
type HTTPError struct {
	Status int
	Err    error
}

func (e *HTTPError) Error() string { return fmt.Sprintf("%d: %v", e.Status, e.Err) }

func (e *HTTPError) Unwrap() error { return e.Err }

func httpError(status int, err error) error { return &HTTPError{Status: status, Err: err} }

// durationsNonNegative is Validate's check of every duration of c.
func durationsNonNegative(ds ...Duration) bool {
	for _, d := range ds {
		if d < 0 {
			return false
		}
	}
	return true
}

// setIdentity tells the host who the request was admitted as.
func (h *Handler) setIdentity(r *http.Request, d *vc.Delegation) {
	if h.hooks.Identity != nil && d != nil {
		h.hooks.Identity(r, d)
	}
}
