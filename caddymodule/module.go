// Package caddymodule is the Caddy side of caddy-mcpi: the http.handlers.mcpi
// middleware, its Caddyfile directive and the `caddy mcpi` subcommands. It is
// the only package of the module that imports Caddy; credential formats and
// DID resolution live in vc/ and didresolver/.
package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("mcpi", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("mcpi", httpcaddyfile.After, "basic_auth")
}

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

	// Accept credentials that state no end of validity (no exp,
	// expirationDate or validUntil). Off by default: such credentials are
	// refused with 401 no_expiry, since nothing else ever retires them.
	AllowEndlessCredentials bool `json:"allow_endless_credentials,omitempty"`

	// Refuse credentials valid for longer than this, from their start to
	// their end (401 lifetime_too_long). With allow_endless_credentials, an
	// endless credential is accepted for this long after its start.
	// Default: no maximum.
	MaxCredentialLifetime caddy.Duration `json:"max_credential_lifetime,omitempty"`

	// Level 2 settings (edge/identity).
	Level2Config
	// Level 3 settings (level3.go).
	Level3Config
	// Revocation and Linked Data proof settings (delegation.go).
	DelegationConfig
	// Per-tool policy settings.
	PolicyConfig
	// Rate limits and quotas.
	RateLimitConfig
	// Metrics and audit log settings.
	ObservabilityConfig
	// KYA-OS request proofs, response proofs and declarations.
	ProofConfig

	// The front door: the edge as the OAuth 2.1 authorization server of
	// this route, issuing delegation credentials in the users' names.
	// Off unless set.
	AuthorizationServer *AuthorizationServerConfig `json:"authorization_server,omitempty"`
	// Trust the users whose DIDs this edge's authorization server hosts,
	// beside trusted_issuers (Caddyfile: `trust authorization_server`).
	TrustAuthorizationServer bool `json:"trust_authorization_server,omitempty"`

	edge *edge.Handler
	// nonceStore is the loaded nonce_store module (Caddy cleans it up);
	// ownStore the default one, released by Cleanup.
	nonceStore challenge.NonceStore
	ownStore   *MemoryNonceStore
	// storage, when set before Provision (tests), replaces Caddy's storage.
	storage assertion.Storage
	// obs: the Caddyfile already gave audit_log.
	auditSet bool
	cacheKey string // key in didCaches; empty until Provision got one
	logger   *zap.Logger
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

// Provision maps the config onto edge.Config and builds the edge with
// Caddy's services: its logger, metrics registry, storage, the nonce store
// module and a DID cache shared across reloads.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	cfg := h.edgeConfig()
	if err := resolveSignIn(&cfg); err != nil {
		return err
	}
	// A bad config must not load a store or touch the storage first.
	if err := h.Validate(); err != nil {
		return err
	}
	hooks := caddyHooks
	hooks.Identity = new(placeholders).set
	if h.AuthorizationServer != nil {
		hooks.SignedInUser = signedInUser(h.AuthorizationServer.UserIDPlaceholder)
	}
	opts := []edge.Option{edge.WithLogger(h.logger), edge.WithHooks(hooks)}
	if reg := ctx.GetMetricsRegistry(); reg != nil {
		opts = append(opts, edge.WithMetrics(reg))
	}

	ttl, timeout := orDefault(cfg.DIDCacheTTL, edge.DefaultDIDCacheTTL), orDefault(cfg.DIDWebTimeout, edge.DefaultDIDWebTimeout)
	key := fmt.Sprintf("mcpi-did-cache ttl=%d timeout=%d private=%t", ttl, timeout, h.AllowPrivateDIDWeb)
	val, _, err := didCaches.LoadOrNew(key, func() (caddy.Destructor, error) {
		res := didresolver.New(
			didresolver.WithTimeout(timeout),
			didresolver.WithAllowPrivateAddresses(h.AllowPrivateDIDWeb),
			didresolver.WithAllowHTTP(h.AllowPrivateDIDWeb),
		)
		return pooledCache{didresolver.NewCache(res, didresolver.WithTTL(ttl))}, nil
	})
	if err != nil {
		return fmt.Errorf("mcpi: DID resolver: %v", err)
	}
	h.cacheKey = key
	opts = append(opts, edge.WithDIDResolver(val.(pooledCache).Cache))

	st := h.storage
	if st == nil {
		if cs := storageFromContext(ctx); cs != nil {
			st = edgeKeyStorage{cs}
		}
	}
	if st != nil && validating() {
		st = readOnlyStorage{st} // storage_validate.go
	}
	if st != nil {
		opts = append(opts, edge.WithKeyStorage(st))
	}
	// Every level: presentations are single-use through the store.
	s, name, err := h.loadNonceStore(ctx)
	if err != nil {
		return err
	}
	opts = append(opts, edge.WithNonceStore(s, name))

	e, err := edge.New(cfg, opts...)
	if err != nil {
		return err
	}
	h.edge = e
	h.warnAccessLog(ctx)
	return nil
}

// loadNonceStore loads the nonce_store module, or the pooled memory store
// by default, so that issued challenges outlive a config reload.
func (h *Handler) loadNonceStore(ctx caddy.Context) (challenge.NonceStore, string, error) {
	if h.NonceStoreRaw != nil {
		mod, err := ctx.LoadModule(&h.Level3Config, "NonceStoreRaw")
		if err != nil {
			return nil, "", fmt.Errorf("mcpi: loading nonce store: %v", err)
		}
		s, ok := mod.(challenge.NonceStore)
		if !ok {
			return nil, "", fmt.Errorf("mcpi: nonce store module %T is not a challenge.NonceStore", mod)
		}
		h.nonceStore = s
		return s, mod.(caddy.Module).CaddyModule().ID.Name(), nil
	}
	m := new(MemoryNonceStore)
	if err := m.Provision(ctx); err != nil {
		return nil, "", err
	}
	h.ownStore = m
	return m, "memory", nil
}

// Validate checks the configuration. It works on an unprovisioned Handler
// too (zero values mean defaults), so Caddyfile tests can call it directly.
func (h *Handler) Validate() error {
	if err := h.AuthorizationServer.validate(); err != nil {
		return err
	}
	cfg := h.edgeConfig()
	if err := resolveSignIn(&cfg); err != nil {
		return err
	}
	return cfg.Validate()
}

// ServeHTTP hands the request to the edge, with the rest of the route as
// next. An edge error that names a status becomes Caddy's HandlerError, so
// handle_errors sees it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	err := h.edge.ServeNext(w, r, nextFunc(next))
	if err != nil {
		if he, ok := errors.AsType[*edge.HTTPError](err); ok {
			return caddyhttp.Error(he.Status, he.Err)
		}
	}
	return err
}

// nextFunc is next as the edge calls it. Caddy hands a middleware its next
// handler as a caddyhttp.HandlerFunc, which converts to edge.Next for
// nothing, where the method value next.ServeHTTP is a closure allocated on
// every request.
func nextFunc(next caddyhttp.Handler) edge.Next {
	if f, ok := next.(caddyhttp.HandlerFunc); ok {
		return edge.Next(f)
	}
	return next.ServeHTTP
}

// Cleanup closes the edge and releases this config's hold on the shared
// DID cache and the default nonce store. It runs even after a failed
// Provision.
func (h *Handler) Cleanup() error {
	var errs []error
	if h.edge != nil {
		errs = append(errs, h.edge.Close())
		h.edge = nil
	}
	if h.ownStore != nil {
		errs = append(errs, h.ownStore.Cleanup())
		h.ownStore = nil
	}
	if h.cacheKey != "" {
		_, err := didCaches.Delete(h.cacheKey)
		h.cacheKey = ""
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
