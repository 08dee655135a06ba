package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
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

// provisionFrontDoor builds the authorization server; it runs before the
// verifier, whose resolver and trust it extends.
func (h *Handler) provisionFrontDoor() error {
	if h.AuthorizationServer == nil {
		return nil
	}
	store, ok := h.rawNonceStore().(authserver.Store)
	if !ok {
		return fmt.Errorf("mcpi: authorization_server needs a nonce store that keeps bindings (memory or redis), got %T", h.rawNonceStore())
	}
	fetch, err := didresolver.GuardedClient(nil, h.AllowPrivateDIDWeb, 5*time.Second)
	if err != nil {
		return err
	}
	deps := authserver.Deps{
		Origin: h.origin,
		Path: func(r *http.Request) string {
			_, u := h.original(r)
			return u.Path
		},
		User:         h.signedInUser,
		EdgeAudience: h.edgeAudience,
		Scopes:       h.routeScopes(),
		Store:        store,
		FetchClient:  fetch,
		Event:        h.obs.AuthServer,
		Logger:       h.logger.Named("authserver"),
	}
	if h.keyStorage != nil {
		deps.Keys = h.keyStorage
	}
	// DPoP at the token endpoint, with the resource side's checker:
	// proofs are single-use in the shared store, so a proof replayed to
	// another replica is refused too.
	if h.dpop != nil {
		checker := h.dpop
		deps.DPoP = func(ctx context.Context, proof, method, url string) (authserver.DPoPProof, error) {
			p, err := checker.Check(ctx, proof, dpop.Expect{Method: method, URL: url})
			return authserver.DPoPProof{JKT: p.JKT, Key: p.Public}, err
		}
	}
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	as, err := authserver.New(ctx, *h.AuthorizationServer, deps)
	if err != nil {
		return err
	}
	h.front = as
	return nil
}

// rawNonceStore is the store as given (or the handler's own).
func (h *Handler) rawNonceStore() challenge.NonceStore {
	if h.nonceStore != nil {
		return h.nonceStore
	}
	return h.ownStore
}

// frontDoorOptions are the verifier options the front door needs: its
// users' DIDs trusted (with `trust authorization_server`).
func (h *Handler) frontDoorOptions() []vc.Option {
	if h.front == nil || !h.TrustAuthorizationServer {
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

// verifierResolver is the resolver the verifier uses.
func (h *Handler) verifierResolver() didresolver.Resolver {
	if h.front == nil {
		return observe.TraceResolver(h.didCache)
	}
	return observe.TraceResolver(resolverWithUsers{as: h.front, next: h.didCache})
}

// serveFrontDoor is step 2b: the front door's endpoints need no credential
// and are not decisions about a request, so they are not audited as ones.
func (h *Handler) serveFrontDoor(w http.ResponseWriter, r *http.Request) bool {
	return h.front != nil && h.front.Serve(w, r)
}

// checkGrantRevoked refuses a delegation any of whose credentials the
// front door issued and has since revoked (on any replica).
func (h *Handler) checkGrantRevoked(r *http.Request, d *vc.Delegation) error {
	if h.front == nil {
		return nil
	}
	for _, id := range d.Chain {
		fam, ok := strings.CutPrefix(id, grantIDPrefix)
		if !ok {
			continue
		}
		fam, _, _ = strings.Cut(fam, ":")
		revoked, err := h.front.Revoked(r.Context(), fam)
		if err != nil {
			return fmt.Errorf("%w: revocation record: %v", vc.ErrStatusUnavailable, err)
		}
		if revoked {
			return fmt.Errorf("%w: revoked at the authorization server", vc.ErrRevoked)
		}
	}
	return nil
}

// origin is scheme://host as the client reached the edge.
func (h *Handler) origin(r *http.Request) string {
	return h.requestScheme(r) + "://" + h.serviceHost(r)
}

// edgeAudience is the name a credential for r carries beside its resource,
// so that the edge's own audience check (per host) accepts it.
func (h *Handler) edgeAudience(r *http.Request) string {
	if len(h.Audiences) > 0 {
		return h.Audiences[0]
	}
	return requestAudiences(h.serviceHost(r))[0]
}

// signedInUser is the subject the host's authentication established.
func (h *Handler) signedInUser(r *http.Request) string {
	if h.hooks.SignedInUser == nil {
		return ""
	}
	return h.hooks.SignedInUser(r)
}

// routeScopes are the scopes a client may ask for: every scope the tool
// policy or require_scopes names, with the tools each opens; with the
// KYA-OS convention, "<tool>:execute" of every exactly named tool.
func (h *Handler) routeScopes() []authserver.Scope {
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
	for _, s := range h.RequiredScopes {
		add(s, "")
	}
	for _, t := range h.Tools {
		for _, s := range t.Scopes {
			add(s, t.Name)
		}
		if len(t.Scopes) == 0 && h.ToolScopeConvention && !t.AllowAnonymous && !strings.ContainsAny(t.Name, "*?[") {
			add(t.Name+":execute", t.Name)
		}
	}
	return out
}

// stepUpScope reports whether a request is a single tools/call refused
// for missing scopes, made with a credential the front door issued, and
// the scopes to ask for then: the granted ones and the missing ones, so
// that an OAuth client asks the user again through the same consent and
// keeps what it had. stepUp answers it the OAuth way (RFC 6750 §3.1):
// 403 insufficient_scope with that scope. Other clients get the tool
// result they always got.
func (h *Handler) stepUpScope(msgs []mcp.Message, batch bool, decisions []mcp.Decision, d *vc.Delegation) (string, bool) {
	if h.front == nil || d == nil || batch || len(msgs) != 1 || !authserver.IsUserDID(d.Issuer) {
		return "", false
	}
	dec := decisions[0]
	if dec.Allowed || dec.Reason != mcp.ReasonInsufficientScope || len(dec.Missing) == 0 {
		return "", false
	}
	scopes := slices.Clone(d.Scopes)
	for _, s := range dec.Missing {
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	return strings.Join(scopes, " "), true
}

func (h *Handler) stepUp(w http.ResponseWriter, r *http.Request, scope string) {
	h.writeRejection(w, r, rejection{status: http.StatusForbidden, code: "insufficient_scope",
		description: "the delegation lacks a scope this tool needs: authorize again with the scopes named in WWW-Authenticate",
		scope:       scope, challenge: true, tag: "insufficient_scope"})
}
