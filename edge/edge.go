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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/internal/loglimit"
	"github.com/mcpi-edge/caddy-mcpi/vc"
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
	Config

	hooks Hooks

	ident  *identity.Identity // nil below level 2
	l3     level3
	policy policyState
	// limits is nil without rate limits (ratelimits.go).
	limits *rateLimits
	obs    *observe.Recorder
	// proofs is the KYA-OS gate: declarations, request and response proofs.
	proofs *proof.Gate
	// dpop checks the proofs of DPoP-bound credentials (boundcredential.go).
	dpop *dpop.Checker
	// proofHostDID is the proofs' audience by Host (kyaos.go).
	proofHostDID hostDID
	// front is the authorization server (frontdoor.go); nil when off.
	front *authserver.Server

	logger *zap.Logger
	// resumeWarn limits the warnings that a resumeToken could not be
	// issued (kyaos_challenge.go).
	resumeWarn loglimit.Every
	verifier   *vc.Verifier
	carriers   *carrier.Reader
	// checks are the per-request verification rules that do not depend on
	// the request (everything but derived audiences).
	checks []vc.CheckOption
	// hostChecks caches checksFor's rules.
	hostChecks *checkCache
	// httpOrigin and httpsOrigin cache upstreamName's origins
	// (observability.go).
	httpOrigin, httpsOrigin lastDerived

	registerer     prometheus.Registerer
	keyStorage     assertion.Storage
	didCache       *didresolver.Cache
	nonceStore     challenge.NonceStore
	nonceStoreName string
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
	h := &Handler{Config: cfg}
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
	if err := h.Config.Validate(); err != nil {
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
	h.applyDefaults()
	if err := h.provisionObservability(); err != nil {
		return err
	}
	enabled, err := carrier.ParseSet(h.Carriers)
	if err != nil {
		return err
	}
	h.carriers = carrier.New(carrier.Config{Enabled: enabled, MaxBody: h.MaxBodySize, Passthrough: h.PassthroughCredential})

	if h.didCache == nil {
		res := didresolver.New(
			didresolver.WithTimeout(time.Duration(h.DIDWebTimeout)),
			didresolver.WithAllowPrivateAddresses(h.AllowPrivateDIDWeb),
			didresolver.WithAllowHTTP(h.AllowPrivateDIDWeb),
		)
		h.didCache = didresolver.NewCache(res, didresolver.WithTTL(time.Duration(h.DIDCacheTTL)))
	}

	// The Level 3 nonce store is also the verifier's replay guard.
	h.provisionNonceStore()
	h.provisionDPoP()
	if err := h.provisionFrontDoor(); err != nil {
		return err
	}
	more, err := h.delegationOptions()
	if err != nil {
		return err
	}
	more = append(more, h.frontDoorOptions()...)
	// Trust is always given, so that a config that somehow skipped
	// Validate trusts no issuer rather than every issuer.
	h.verifier = vc.NewVerifier(h.verifierResolver(), append([]vc.Option{
		vc.WithClockSkew(time.Duration(h.ClockSkew)),
		vc.WithMaxSize(int(h.MaxCredentialSize)),
		vc.WithTrustedIssuers(h.TrustedIssuers...),
		vc.WithTrace(observe.StartVerify),
	}, append(append(more, h.lifetimeOptions()...), h.verificationCacheOptions()...)...)...)

	h.checks = nil
	if h.RequireAudience {
		h.checks = append(h.checks, vc.RequireAudience())
	}
	if len(h.RequiredScopes) > 0 {
		h.checks = append(h.checks, vc.RequireScopes(h.RequiredScopes...))
	}
	h.hostChecks = newCheckCache(h.Audiences, h.checks)
	if err := h.provisionIdentity(); err != nil {
		return err
	}
	if err := h.provisionLevel3(); err != nil {
		return err
	}
	h.provisionProofs()
	if err := h.provisionRateLimits(); err != nil {
		return err
	}
	return h.provisionPolicy()
}

// applyDefaults fills in what the config left at zero.
func (h *Handler) applyDefaults() {
	if h.Level == 0 {
		h.Level = DefaultLevel
	}
	if h.NonDelegationBearer == "" {
		h.NonDelegationBearer = BearerPass
	}
	if h.ClockSkew == 0 {
		h.ClockSkew = Duration(DefaultClockSkew)
	}
	if h.MaxCredentialSize == 0 {
		h.MaxCredentialSize = DefaultMaxCredentialSize
	}
	if h.MaxBodySize == 0 {
		h.MaxBodySize = DefaultMaxBodySize
	}
	if h.DIDCacheTTL == 0 {
		h.DIDCacheTTL = Duration(DefaultDIDCacheTTL)
	}
	if h.DIDWebTimeout == 0 {
		h.DIDWebTimeout = Duration(DefaultDIDWebTimeout)
	}
}

// lifetimeOptions are the verifier's rules on a credential's validity span.
func (h *Handler) lifetimeOptions() []vc.Option {
	var opts []vc.Option
	if h.AllowEndlessCredentials {
		opts = append(opts, vc.WithAllowNoExpiry())
	}
	if h.MaxCredentialLifetime > 0 {
		opts = append(opts, vc.WithMaxLifetime(time.Duration(h.MaxCredentialLifetime)))
	}
	return opts
}

// verificationCacheOptions turns on the verified-delegation cache and
// counts its hits and misses.
func (h *Handler) verificationCacheOptions() []vc.Option {
	size := h.VerificationCacheSize
	switch {
	case size < 0:
		return nil
	case size == 0:
		size = DefaultVerificationCache
	}
	return []vc.Option{
		vc.WithResultCache(size),
		vc.WithCacheObserver(func(hit bool) { h.obs.Cache("delegation", hit) }),
	}
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
		err = errors.Join(h.cleanupLevel3(), h.closeIdentity())
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

// original is the method and URL of the request as the client sent it
// (Hooks.Original).
func (h *Handler) original(r *http.Request) (string, *url.URL) {
	if h.hooks.Original != nil {
		if m, u := h.hooks.Original(r); u != nil {
			return m, u
		}
	}
	return r.Method, r.URL
}

// setIdentity tells the host who the request was admitted as.
func (h *Handler) setIdentity(r *http.Request, d *vc.Delegation) {
	if h.hooks.Identity != nil && d != nil {
		h.hooks.Identity(r, d)
	}
}
