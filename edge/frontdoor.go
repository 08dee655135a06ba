package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"go.uber.org/zap"
)

// The front door (edge/authserver): where it is on, the edge is the
// OAuth 2.1 authorization server of its route, whose access tokens are
// delegation credentials issued by the signed-in user's DID, which the edge
// hosts. This file wires it into the pipeline: its endpoints (step 2b), the
// local resolution of its users' DIDs, the trust in them, and revocation.

// FrontDoorConfig holds the front door settings.
type FrontDoorConfig struct {
	// The route's OAuth 2.1 authorization server (nil: off).
	AuthorizationServer *authserver.Config `json:"-"`

	// Trust the users whose DIDs this edge hosts (did:web:<host>:oauth:
	// users:<id>) as issuers, beside TrustedIssuers. Needs
	// AuthorizationServer: such DIDs are then resolved from the edge's
	// own key storage, never fetched.
	TrustAuthorizationServer bool `json:"trust_authorization_server,omitempty"`
}

// grantIDPrefix starts the id of every credential the front door issues,
// followed by its refresh family: the verification path reads the family
// from the id of any credential of a chain to check its revocation.
const grantIDPrefix = authserver.CredentialIDPrefix

func (c *FrontDoorConfig) validateFrontDoor() error {
	if c.TrustAuthorizationServer && c.AuthorizationServer == nil {
		return errors.New("mcpi: trust authorization_server needs the authorization_server block in the same mcpi handler")
	}
	if c.AuthorizationServer != nil {
		return c.AuthorizationServer.Validate()
	}
	return nil
}

// frontDoorParts are what the front door takes from the route.
type frontDoorParts struct {
	site *site.Site
	// signedIn is the host's SignedInUser hook; nil: nobody is.
	signedIn func(*http.Request) string
	// store is the nonce store as given (not measured): the front door
	// keeps its records there.
	store  challenge.NonceStore
	keys   assertion.Storage
	dpop   *dpop.Checker
	obs    *observe.Recorder
	logger *zap.Logger
}

// newFrontDoor builds the authorization server, nil when it is off; it is
// built before the verifier, whose resolver and trust it extends.
func newFrontDoor(ctx context.Context, cfg *Config, p frontDoorParts) (*authserver.Server, error) {
	if cfg.AuthorizationServer == nil {
		return nil, nil
	}
	store, ok := p.store.(authserver.Store)
	if !ok {
		return nil, fmt.Errorf("mcpi: authorization_server needs a nonce store that keeps bindings (memory or redis), got %T", p.store)
	}
	fetch, err := didresolver.GuardedClient(nil, cfg.AllowPrivateDIDWeb, 5*time.Second)
	if err != nil {
		return nil, err
	}
	deps := authserver.Deps{
		Origin: p.site.Origin,
		Path: func(r *http.Request) string {
			_, u := p.site.Original(r)
			return u.Path
		},
		// The subject the host's authentication established.
		User: func(r *http.Request) string {
			if p.signedIn == nil {
				return ""
			}
			return p.signedIn(r)
		},
		// The name a credential for r carries beside its resource, so
		// that the edge's own audience check (per host) accepts it.
		EdgeAudience: func(r *http.Request) string {
			if len(cfg.Audiences) > 0 {
				return cfg.Audiences[0]
			}
			return site.DIDWeb(p.site.Host(r))
		},
		Scopes:      cfg.routeScopes(),
		Store:       store,
		FetchClient: fetch,
		Event:       p.obs.AuthServer,
		Logger:      p.logger.Named("authserver"),
	}
	if p.keys != nil {
		deps.Keys = p.keys
	}
	// DPoP at the token endpoint, with the resource side's checker:
	// proofs are single-use in the shared store, so a proof replayed to
	// another replica is refused too.
	if p.dpop != nil {
		checker := p.dpop
		deps.DPoP = func(ctx context.Context, proof, method, url string) (authserver.DPoPProof, error) {
			pr, err := checker.Check(ctx, proof, dpop.Expect{Method: method, URL: url})
			return authserver.DPoPProof{JKT: pr.JKT, Key: pr.Public}, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return authserver.New(ctx, *cfg.AuthorizationServer, deps)
}

// frontDoorOptions are the verifier options the front door needs: its
// users' DIDs trusted (with `trust authorization_server`).
func frontDoorOptions(front *authserver.Server, cfg *Config) []vc.Option {
	if front == nil || !cfg.TrustAuthorizationServer {
		return nil
	}
	return []vc.Option{vc.WithTrustedIssuerFunc(authserver.IsUserDID)}
}

// resolverWithUsers resolves the front door's user DIDs from its own keys
// and every other DID through next.
type resolverWithUsers struct {
	as   *authserver.Server
	next didresolver.Resolver
}

func (r resolverWithUsers) Resolve(ctx context.Context, did string) (*didresolver.Document, error) {
	if authserver.IsUserDID(did) {
		return r.as.Resolve(ctx, did)
	}
	return r.next.Resolve(ctx, did)
}

func (r resolverWithUsers) Refresh(ctx context.Context, did string) (*didresolver.Document, error) {
	if authserver.IsUserDID(did) {
		return r.as.Resolve(ctx, did)
	}
	if rf, ok := r.next.(didresolver.Refresher); ok {
		return rf.Refresh(ctx, did)
	}
	return r.next.Resolve(ctx, did)
}

// verifierResolver is the resolver the verifier uses: the front door's
// users' DIDs from its own keys, when it is on.
func verifierResolver(front *authserver.Server, dids didresolver.Resolver) didresolver.Resolver {
	if front == nil {
		return observe.TraceResolver(dids)
	}
	return observe.TraceResolver(resolverWithUsers{as: front, next: dids})
}

// grantRevoked reports whether the front door revoked the credential id
// (on any replica); false for an id it did not issue.
func grantRevoked(front *authserver.Server) func(ctx context.Context, id string) (bool, error) {
	return func(ctx context.Context, id string) (bool, error) {
		fam, ok := strings.CutPrefix(id, grantIDPrefix)
		if !ok {
			return false, nil
		}
		fam, _, _ = strings.Cut(fam, ":")
		return front.Revoked(ctx, fam)
	}
}

// routeScopes are the scopes a client may ask for: every scope the tool
// policy or require_scopes names, with the tools each opens; with the
// KYA-OS convention, "<tool>:execute" of every exactly named tool.
func (cfg *Config) routeScopes() []authserver.Scope {
	var out []authserver.Scope
	add := func(scope, tool string) {
		for i := range out {
			if out[i].Name == scope {
				if tool != "" && !slices.Contains(out[i].Tools, tool) {
					out[i].Tools = append(out[i].Tools, tool)
				}
				return
			}
		}
		s := authserver.Scope{Name: scope}
		if tool != "" {
			s.Tools = []string{tool}
		}
		out = append(out, s)
	}
	for _, s := range cfg.RequiredScopes {
		add(s, "")
	}
	for _, t := range cfg.Tools {
		for _, s := range t.Scopes {
			add(s, t.Name)
		}
		if len(t.Scopes) == 0 && cfg.ToolScopeConvention && !t.AllowAnonymous && !strings.ContainsAny(t.Name, "*?[") {
			add(t.Name+":execute", t.Name)
		}
	}
	return out
}
