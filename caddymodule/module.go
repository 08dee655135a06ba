// Package caddymodule is the Caddy side of caddy-mcpi: the http.handlers.mcpi
// middleware, its Caddyfile directive and the `caddy mcpi` subcommands. It is
// the only package of the module that imports Caddy; credential formats and
// DID resolution live in vc/ and didresolver/.
package caddymodule

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("mcpi", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("mcpi", httpcaddyfile.After, "basic_auth")
}

// Defaults. They live here, not in the libraries' defaults, so that the JSON
// docs and the Caddyfile agree with what the handler actually does.
const (
	defaultLevel             = 1
	defaultClockSkew         = 60 * time.Second
	defaultMaxCredentialSize = 64 << 10
	defaultMaxBodySize       = 1 << 20
	defaultDIDCacheTTL       = 5 * time.Minute
	defaultDIDWebTimeout     = 5 * time.Second
	defaultVerificationCache = 10000

	// anyIssuer in TrustedIssuers accepts every resolvable issuer.
	anyIssuer = vc.AnyIssuer

	bearerPass   = "pass"
	bearerReject = "reject"
)

// errTrustRequired is returned by Validate when no trust policy is set:
// accepting every issuer must be an explicit choice.
var errTrustRequired = errors.New("mcpi: trust is required (use `trust any` to accept every issuer)")

// Handler admits a request only when it carries a valid MCP-I delegation
// credential (Level 1), and tells the rest of the route who the agent and the
// user are through placeholders. It strips identity headers that clients
// could forge, and removes the credential before the request goes upstream.
type Handler struct {
	// MCP-I level enforced by the edge: 1 verifies the delegation; 2 also
	// tells MCP-I-aware upstreams who is calling; 3 also handles the
	// challenge-response handshake. Default: 1.
	Level int `json:"level,omitempty"`

	// DIDs of the issuers (delegators) whose credentials are accepted; ["*"]
	// accepts every issuer whose DID resolves. Required: there is no default,
	// so that trusting everyone is always a written decision.
	TrustedIssuers []string `json:"trusted_issuers,omitempty"`

	// Audiences this edge answers to. A credential that names an audience
	// must name one of these. Default: derived from each request's Host:
	// did:web:<host> (port %3A-encoded), https://<host> and <host>.
	Audiences []string `json:"audiences,omitempty"`

	// Reject credentials that name no audience. Off by default because the
	// credentials minted by KYA-OS carry no aud.
	RequireAudience bool `json:"require_audience,omitempty"`

	// Accept the credential only inside a Verifiable Presentation signed
	// by the agent (VP-JWT or JSON VP), which proves it holds the agent's
	// key; a bare credential gets 401 presentation_required. A Level 3
	// handshake proves possession too: its verify call takes a bare
	// credential, and its session admits.
	RequirePresentation bool `json:"require_presentation,omitempty"`

	// Scopes every request on this route needs (exact match). A verified
	// credential lacking one gets 403 insufficient_scope.
	RequiredScopes []string `json:"required_scopes,omitempty"`

	// Carriers read for the credential: authorization, kya_delegation,
	// kya_os_delegation_credential, mcp_i_credential, delegation_token,
	// mcpi_delegation; and kya_os_delegation_chain, the
	// KYA-OS-Delegation-Chain header, which carries the ancestors of a
	// delegation chain, not a credential. Default: all of them.
	Carriers []string `json:"carriers,omitempty"`

	// What to do with an Authorization bearer that is not a VC/VP JWT (an
	// OAuth token meant for the upstream): "pass" leaves it untouched and
	// looks for the delegation in the other carriers; "reject" answers 401.
	// Default: pass.
	NonDelegationBearer string `json:"non_delegation_bearer,omitempty"`

	// Tolerance on every date check of the credential. Default: 60s.
	ClockSkew caddy.Duration `json:"clock_skew,omitempty"`

	// Largest credential accepted, in bytes. Default: 65536.
	MaxCredentialSize int64 `json:"max_credential_size,omitempty"`

	// Largest JSON-RPC request body read when looking for body carriers, in
	// bytes; a larger body gets 413. Default: 1048576.
	MaxBodySize int64 `json:"max_body_size,omitempty"`

	// How long a resolved DID document is cached. Default: 5m.
	DIDCacheTTL caddy.Duration `json:"did_cache_ttl,omitempty"`

	// Timeout of one did:web document fetch. Default: 5s.
	DIDWebTimeout caddy.Duration `json:"did_web_timeout,omitempty"`

	// Let did:web reach loopback and private addresses, over plain http.
	// For tests and development only: it opens the resolver to SSRF.
	AllowPrivateDIDWeb bool `json:"allow_private_did_web,omitempty"`

	// Authorization servers listed in the RFC 9728 protected resource
	// metadata served at /.well-known/oauth-protected-resource.
	AuthorizationServers []string `json:"authorization_servers,omitempty"`

	// Forward the credential carriers upstream. Off by default: the
	// credential was presented to the edge, and passing it on would let the
	// upstream (or anyone it leaks to) replay it.
	PassthroughCredential bool `json:"passthrough_credential,omitempty"`

	// How many verified delegations are kept, keyed by the SHA-256 of the
	// presented credential and the request's checks, so that a credential
	// presented again is not parsed or verified again. Entries never outlive
	// the credential, its revocation-status TTL, or 60s. -1 turns the cache
	// off. Default: 10000.
	VerificationCacheSize int `json:"verification_cache_size,omitempty"`

	// Level 2 settings (level2.go).
	Level2Config
	// Level 3 settings (level3.go).
	Level3Config
	// Revocation and Linked Data proof settings (delegation.go).
	DelegationConfig
	// Per-tool policy settings (policy.go).
	PolicyConfig
	// Metrics and audit log settings (observe.go).
	ObservabilityConfig

	l2     level2
	l3     level3
	policy policyState
	obs    observability

	logger   *zap.Logger
	verifier *vc.Verifier
	enabled  carrierSet
	// checks are the per-request verification rules that do not depend on
	// the request (everything but derived audiences).
	checks []vc.CheckOption
	// hostChecks caches checksFor's rules; nil before Provision.
	hostChecks *checkCache
	// bearers remembers the delegation bearers seen; nil before Provision.
	bearers  *bearerMemo
	cacheKey string // key in didCaches; empty until Provision got one
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.mcpi",
		New: func() caddy.Module { return new(Handler) },
	}
}

// didCaches shares DID document caches across config reloads: a reload
// provisions a new Handler, and without the pool every reload would start
// with a cold cache and refetch every did:web issuer.
var didCaches = caddy.NewUsagePool()

// pooledCache adapts a didresolver.Cache to caddy.Destructor. The cache owns
// no goroutines or connections, so there is nothing to release.
type pooledCache struct{ *didresolver.Cache }

func (pooledCache) Destruct() error { return nil }

// Provision sets defaults and builds the resolver and the verifier.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()

	if h.Level == 0 {
		h.Level = defaultLevel
	}
	if h.NonDelegationBearer == "" {
		h.NonDelegationBearer = bearerPass
	}
	if h.ClockSkew == 0 {
		h.ClockSkew = caddy.Duration(defaultClockSkew)
	}
	if h.MaxCredentialSize == 0 {
		h.MaxCredentialSize = defaultMaxCredentialSize
	}
	if h.MaxBodySize == 0 {
		h.MaxBodySize = defaultMaxBodySize
	}
	if h.DIDCacheTTL == 0 {
		h.DIDCacheTTL = caddy.Duration(defaultDIDCacheTTL)
	}
	if h.DIDWebTimeout == 0 {
		h.DIDWebTimeout = caddy.Duration(defaultDIDWebTimeout)
	}

	if err := h.provisionObservability(ctx); err != nil {
		return err
	}

	enabled, err := parseCarriers(h.Carriers)
	if err != nil {
		return err
	}
	h.enabled = enabled

	key := fmt.Sprintf("mcpi-did-cache ttl=%d timeout=%d private=%t",
		h.DIDCacheTTL, h.DIDWebTimeout, h.AllowPrivateDIDWeb)
	val, _, err := didCaches.LoadOrNew(key, func() (caddy.Destructor, error) {
		res := didresolver.New(
			didresolver.WithTimeout(time.Duration(h.DIDWebTimeout)),
			didresolver.WithAllowPrivateAddresses(h.AllowPrivateDIDWeb),
			didresolver.WithAllowHTTP(h.AllowPrivateDIDWeb),
		)
		return pooledCache{didresolver.NewCache(res, didresolver.WithTTL(time.Duration(h.DIDCacheTTL)))}, nil
	})
	if err != nil {
		return fmt.Errorf("mcpi: DID resolver: %v", err)
	}
	h.cacheKey = key

	// The Level 3 nonce store is also the verifier's replay guard.
	if err := h.provisionNonceStore(ctx); err != nil {
		return err
	}
	more, err := h.delegationOptions()
	if err != nil {
		return err
	}
	// Trust is always given, so that a config that somehow skipped
	// Validate trusts no issuer rather than every issuer.
	h.verifier = vc.NewVerifier(val.(pooledCache).Cache, append([]vc.Option{
		vc.WithClockSkew(time.Duration(h.ClockSkew)),
		vc.WithMaxSize(int(h.MaxCredentialSize)),
		vc.WithTrustedIssuers(h.TrustedIssuers...),
	}, append(more, h.verificationCacheOptions()...)...)...)

	h.checks = nil
	if h.RequireAudience {
		h.checks = append(h.checks, vc.RequireAudience())
	}
	if len(h.RequiredScopes) > 0 {
		h.checks = append(h.checks, vc.RequireScopes(h.RequiredScopes...))
	}
	h.hostChecks = newCheckCache(h.Audiences, h.checks)
	h.bearers = newBearerMemo()
	if err := h.provisionLevel2(ctx); err != nil {
		return err
	}
	if err := h.provisionLevel3(ctx); err != nil {
		return err
	}
	return h.provisionPolicy(ctx)
}

// verificationCacheOptions turns on the verified-delegation cache and
// counts its hits and misses.
func (h *Handler) verificationCacheOptions() []vc.Option {
	size := h.VerificationCacheSize
	switch {
	case size < 0:
		return nil
	case size == 0:
		size = defaultVerificationCache
	}
	return []vc.Option{
		vc.WithResultCache(size),
		vc.WithCacheObserver(func(hit bool) { h.metricCache("delegation", hit) }),
	}
}

// Validate checks the configuration. It works on an unprovisioned Handler
// too (zero values mean defaults), so Caddyfile tests can call it directly.
func (h *Handler) Validate() error {
	switch h.Level {
	case 0, 1, 2, 3:
	default:
		return fmt.Errorf("mcpi: level must be 1, 2 or 3, got %d", h.Level)
	}
	if len(h.TrustedIssuers) == 0 {
		return errTrustRequired
	}
	for _, iss := range h.TrustedIssuers {
		if iss == anyIssuer {
			if len(h.TrustedIssuers) > 1 {
				return errors.New("mcpi: trust any cannot be combined with issuer DIDs")
			}
			continue
		}
		if _, err := didresolver.ParseDID(iss); err != nil {
			return fmt.Errorf("mcpi: trusted issuer %q: %v", iss, err)
		}
	}
	switch h.NonDelegationBearer {
	case "", bearerPass, bearerReject:
	default:
		return fmt.Errorf("mcpi: non_delegation_bearer must be pass or reject, got %q", h.NonDelegationBearer)
	}
	if _, err := parseCarriers(h.Carriers); err != nil {
		return err
	}
	if h.ClockSkew < 0 || h.DIDCacheTTL < 0 || h.DIDWebTimeout < 0 {
		return errors.New("mcpi: durations must not be negative")
	}
	if h.MaxCredentialSize < 0 || h.MaxBodySize < 0 {
		return errors.New("mcpi: sizes must not be negative")
	}
	for _, s := range h.RequiredScopes {
		if s == "" {
			return errors.New("mcpi: empty required scope")
		}
	}
	for _, a := range h.AuthorizationServers {
		u, err := url.Parse(a)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Errorf("mcpi: authorization server %q is not an absolute URL", a)
		}
	}
	if err := h.validateLevel2(); err != nil {
		return err
	}
	if err := h.validateLevel3(); err != nil {
		return err
	}
	if err := h.validateDelegation(); err != nil {
		return err
	}
	if err := h.validateObservability(); err != nil {
		return err
	}
	return h.validatePolicy()
}

// Cleanup releases this config's hold on the shared DID cache. It runs even
// after a failed Provision, hence the empty-key check.
func (h *Handler) Cleanup() error {
	errs := []error{h.cleanupLevel3(), h.cleanupLevel2()}
	if h.cacheKey != "" {
		_, err := didCaches.Delete(h.cacheKey)
		h.cacheKey = ""
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
