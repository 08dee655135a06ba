// Package authserver is the edge's front door: an OAuth 2.1 authorization
// server for MCP clients (RFC 8414 metadata, RFC 7591 registration and
// Client ID Metadata Documents, authorization code with PKCE, a consent
// page, refresh and revocation) whose access tokens are delegation
// credentials: VC-JWTs issued by the signed-in user's own DID, which the
// edge hosts, to the agent. The edge then verifies them like any other
// credential.
//
// It knows nothing of Caddy: the signed-in user, the storage for the users'
// keys and the shared store come in through Deps.
package authserver

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// Defaults and limits.
const (
	DefaultCredentialLifetime = time.Hour
	DefaultRefreshLifetime    = 30 * 24 * time.Hour

	// codeLifetime is how long an authorization code may be exchanged.
	codeLifetime = 60 * time.Second
	// maxFormBody bounds every form and JSON body the endpoints read.
	maxFormBody = 16 << 10
)

// Config is what the authorization server of one route does.
type Config struct {
	// CredentialLifetime is the lifetime of an issued credential (the
	// access token). Default: 1h.
	CredentialLifetime time.Duration `json:"credential_lifetime,omitempty"`
	// RefreshLifetime is how long a refresh token family lives from the
	// consent. Default: 720h.
	RefreshLifetime time.Duration `json:"refresh_lifetime,omitempty"`
	// SignIn is the built-in sign-in (OIDC) for sites without a Caddy
	// authentication module; nil: the host signs users in.
	SignIn *SignInConfig `json:"sign_in,omitempty"`
	// KYAHTTP, when set, answers KYA-OS agents that ask for it with the
	// draft-kya-http-02 challenge and serves its pickup endpoint (kya.go).
	KYAHTTP *KYAHTTPConfig `json:"kya_http,omitempty"`
}

// Validate checks c; zero values mean the defaults.
func (c Config) Validate() error {
	if c.CredentialLifetime < 0 || c.RefreshLifetime < 0 {
		return errors.New("mcpi: authorization_server lifetimes must not be negative")
	}
	if c.CredentialLifetime > 24*time.Hour {
		return errors.New("mcpi: authorization_server credential_lifetime must be at most 24h (the refresh token renews it)")
	}
	if err := c.SignIn.validate(); err != nil {
		return err
	}
	return c.KYAHTTP.Validate()
}

// Scope is one scope a client may ask for, with the tools it opens (tool
// names or globs of the route's tool policy), for the consent page.
type Scope struct {
	Name  string
	Tools []string
}

// KeyStorage keeps the users' signing keys and the server's secret, shared
// by every replica using it (Caddy's storage). Load of a missing key fails
// with an error wrapping fs.ErrNotExist.
type KeyStorage interface {
	Load(ctx context.Context, key string) ([]byte, error)
	Store(ctx context.Context, key string, value []byte) error
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
}

// Store is the shared store: codes and refresh tokens are single-use
// records (NonceStore), revocations bindings with a TTL (SessionBinder).
type Store interface {
	challenge.NonceStore
	challenge.SessionBinder
}

// DPoPProof is what a checked DPoP proof tells the token endpoint.
type DPoPProof struct {
	// JKT is the RFC 7638 thumbprint (base64url) of the proof's key.
	JKT string
	// Key is the proof's public key.
	Key crypto.PublicKey
}

// DPoPChecker checks a DPoP proof (RFC 9449) for a request to method and
// url, without an access token. Nil: the server does not offer DPoP.
type DPoPChecker func(ctx context.Context, proof, method, url string) (DPoPProof, error)

// Event is something operators count and audit: registration,
// consent_approved, consent_denied, issued, refreshed, revoked,
// refresh_reused. Fields never hold a token.
type Event struct {
	Kind     string
	ClientID string // hashed by the recorder if it logs it
	UserDID  string
	AgentDID string
	Scopes   []string
}

// Deps are what the host gives the server.
type Deps struct {
	// Origin is scheme://host[:port] as the client reached the edge.
	Origin func(r *http.Request) string
	// Path is the request's path as the client sent it.
	Path func(r *http.Request) string
	// User is the signed-in user's subject from the host's authentication
	// ("" when nobody is signed in). Never read from a client header.
	User func(r *http.Request) string
	// EdgeAudience is a name the edge's own audience check accepts for r
	// (a credential names it beside the resource).
	EdgeAudience func(r *http.Request) string
	// Scopes lists the route's scopes.
	Scopes []Scope
	// Keys keeps the users' keys and the server's secret; nil: keys in
	// memory, lost on restart and not shared (tests, a single process).
	Keys KeyStorage
	// Store is the shared store (required).
	Store Store
	// DPoP checks proofs at the token endpoint; nil: DPoP not offered.
	DPoP DPoPChecker
	// FetchClient fetches Client ID Metadata Documents; it must be the
	// SSRF-guarded client. Nil: only registered clients.
	FetchClient *http.Client
	// Event records operator events; may be nil.
	Event  func(r *http.Request, e Event)
	Logger *zap.Logger
}

// Server is the authorization server of one route. Safe for concurrent use.
type Server struct {
	cfg  Config
	deps Deps

	secrets *secrets
	users   *userKeys
	clients *cimdCache
	revoked *revocations
	scopes  map[string]Scope
	grants  grantRecords
	lastUse *lastUses
	signIn  *signIn // nil: the host signs users in
}

// New builds the server; ctx bounds the loading of its secret.
func New(ctx context.Context, cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.CredentialLifetime == 0 {
		cfg.CredentialLifetime = DefaultCredentialLifetime
	}
	if cfg.RefreshLifetime == 0 {
		cfg.RefreshLifetime = DefaultRefreshLifetime
	}
	if deps.Store == nil || deps.Origin == nil || deps.User == nil {
		return nil, errors.New("authserver: Store, Origin and User are required")
	}
	if deps.Path == nil {
		deps.Path = func(r *http.Request) string { return r.URL.Path }
	}
	if deps.Logger == nil {
		deps.Logger = zap.NewNop()
	}
	sec, err := loadSecrets(ctx, deps.Keys)
	if err != nil {
		return nil, fmt.Errorf("mcpi: authorization_server secret: %w", err)
	}
	s := &Server{cfg: cfg, deps: deps, secrets: sec, scopes: make(map[string]Scope, len(deps.Scopes))}
	s.users = newUserKeys(deps.Keys, sec)
	s.clients = newCIMDCache(deps.FetchClient)
	s.revoked = newRevocations(deps.Store)
	s.lastUse = newLastUses()
	if s.signIn, err = newSignIn(cfg.SignIn, sec); err != nil {
		return nil, err
	}
	for _, sc := range deps.Scopes {
		s.scopes[sc.Name] = sc
	}
	return s, nil
}

// Paths of the endpoints, under the site's origin.
const (
	pathRegister  = "/oauth/register"
	pathAuthorize = "/oauth/authorize"
	pathToken     = "/oauth/token"
	pathRevoke    = "/oauth/revoke"
	pathUsers     = "/oauth/users/"
)

// Serve answers r if it is for one of the server's endpoints and reports
// whether it did. Every endpoint needs no credential.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request) bool {
	p := s.deps.Path(r)
	if cors(w, r, p) {
		return true
	}
	switch {
	case isMetadataPath(p):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET, HEAD")
			return true
		}
		s.serveMetadata(w, r)
	case p == pathRegister:
		s.serveRegister(w, r)
	case p == pathAuthorize && isAgentConsent(r):
		s.serveAgentConsent(w, r)
	case p == pathAuthorize:
		s.serveAuthorize(w, r)
	case p == pathToken:
		s.serveToken(w, r)
	case p == pathRevoke:
		s.serveRevoke(w, r)
	case strings.HasPrefix(p, pathPickup):
		s.servePickup(w, r, strings.TrimPrefix(p, pathPickup))
	case strings.HasPrefix(p, pathUsers) && strings.HasSuffix(p, "/did.json"):
		s.serveUserDocument(w, r, strings.TrimSuffix(strings.TrimPrefix(p, pathUsers), "/did.json"))
	default:
		return s.serveUserPages(w, r, p)
	}
	return true
}

// cors lets MCP clients that run in a browser (the Inspector's web UI)
// read the metadata and call registration, token and revocation: they
// are public clients, no cookie or ambient credential is involved, so any
// origin may. The authorize endpoint is a page the browser navigates to
// and is not opened to scripts. It reports whether it answered a
// preflight.
func cors(w http.ResponseWriter, r *http.Request, p string) bool {
	switch {
	case isMetadataPath(p), p == pathRegister, p == pathToken, p == pathRevoke, strings.HasPrefix(p, pathUsers):
	default:
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST")
	h.Set("Access-Control-Allow-Headers", "Content-Type, DPoP, Authorization, MCP-Protocol-Version")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// issuer is the server's issuer identifier (RFC 8414): the site's origin.
func (s *Server) issuer(r *http.Request) string { return s.deps.Origin(r) }

func (s *Server) event(r *http.Request, e Event) {
	if s.deps.Event != nil {
		s.deps.Event(r, e)
	}
}
