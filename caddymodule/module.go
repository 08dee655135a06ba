// Package caddymodule is the Caddy side of caddy-mcpi: the http.handlers.mcpi
// middleware, its Caddyfile directive and the `caddy mcpi` subcommands. It is
// the only package of the module that imports Caddy; credential formats and
// DID resolution live in vc/ and didresolver/.
package caddymodule

import (
	"encoding/json"
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
	// What the edge enforces. edge.Config documents each setting (and
	// docs/configuration.md each directive); its fields are the handler's
	// top-level JSON fields, its durations read "5m" or nanoseconds as
	// caddy.Duration does.
	edge.Config

	// Where presentations' single-use records, and at Level 3 the
	// challenges and proxy session bindings, are kept: a module of
	// namespace mcpi.nonce_stores, memory (default) or redis (shared by
	// replicas). Handed to the edge as edge.WithNonceStore.
	NonceStoreRaw json.RawMessage `json:"nonce_store,omitempty" caddy:"namespace=mcpi.nonce_stores inline_key=backend"`

	// The front door: the edge as the OAuth 2.1 authorization server of
	// this route, issuing delegation credentials in the users' names.
	// Off unless set. It stands in for edge.Config's AuthorizationServer,
	// with the Caddy placeholder that names the signed-in user.
	AuthorizationServer *AuthorizationServerConfig `json:"authorization_server,omitempty"`

	edge *edge.Handler
	// nonceStore is the loaded nonce_store module (Caddy cleans it up);
	// ownStore the default one, released by Cleanup.
	nonceStore challenge.NonceStore
	ownStore   *MemoryNonceStore
	// storage, when set before Provision (tests), replaces Caddy's storage.
	storage  assertion.Storage
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
	if err := resolveAuthZEN(&cfg); err != nil {
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

	ttl, timeout := orDefault(time.Duration(cfg.DIDCacheTTL), edge.DefaultDIDCacheTTL), orDefault(time.Duration(cfg.DIDWebTimeout), edge.DefaultDIDWebTimeout)
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
		st = assertion.ReadOnly(st) // storage_validate.go
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
		mod, err := ctx.LoadModule(h, "NonceStoreRaw")
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
	if err := resolveAuthZEN(&cfg); err != nil {
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
