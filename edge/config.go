package edge

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Defaults of Config's zero values.
const (
	DefaultLevel             = 1
	DefaultClockSkew         = 60 * time.Second
	DefaultMaxCredentialSize = 64 << 10
	DefaultMaxBodySize       = 1 << 20
	DefaultDIDCacheTTL       = 5 * time.Minute
	DefaultDIDWebTimeout     = 5 * time.Second
	DefaultVerificationCache = 10000

	// AnyIssuer in TrustedIssuers accepts every resolvable issuer.
	AnyIssuer = vc.AnyIssuer

	BearerPass   = "pass"
	BearerReject = "reject"
)

// Duration is the type of every duration setting: a time.Duration that
// reads "90s", "5m", "1d" or a number of nanoseconds from JSON, as Caddy's
// adapter writes them.
type Duration = duration.Duration

// ErrTrustRequired is returned by Validate when no trust policy is set:
// accepting every issuer must be an explicit choice.
var ErrTrustRequired = errors.New("mcpi: trust is required (use `trust any` to accept every issuer)")

// Config is what an edge enforces. Zero values mean the defaults; New
// validates it. Its JSON form is the config of http.handlers.mcpi, which
// caddymodule embeds as it is.
type Config struct {
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
	ClockSkew duration.Duration `json:"clock_skew,omitempty"`

	// Largest credential accepted, in bytes. Default: 65536.
	MaxCredentialSize int64 `json:"max_credential_size,omitempty"`

	// Largest JSON-RPC request body read when looking for body carriers, in
	// bytes; a larger body gets 413. Default: 1048576.
	MaxBodySize int64 `json:"max_body_size,omitempty"`

	// How long a resolved DID document is cached. Default: 5m.
	DIDCacheTTL duration.Duration `json:"did_cache_ttl,omitempty"`

	// Timeout of one did:web document fetch. Default: 5s.
	DIDWebTimeout duration.Duration `json:"did_web_timeout,omitempty"`

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
	// expirationDate or validUntil). Off: they are refused (no_expiry),
	// since nothing else ever retires them.
	AllowEndlessCredentials bool `json:"allow_endless_credentials,omitempty"`

	// Refuse credentials valid for longer than this, from their start to
	// their end (lifetime_too_long); with AllowEndlessCredentials, an
	// endless credential is accepted for this long after its start. 0: no
	// maximum.
	MaxCredentialLifetime duration.Duration `json:"max_credential_lifetime,omitempty"`

	// Level 2 settings (edge/identity).
	Level2Config
	// Level 3 settings (level3_config.go; the step is edge/level3).
	Level3Config
	// Revocation and Linked Data proof settings (delegation.go).
	DelegationConfig
	// Per-tool policy settings (edge/toolpolicy).
	PolicyConfig
	// Rate limits and quotas (ratelimits.go).
	RateLimitConfig
	// Metrics and audit log settings (observe.go).
	ObservabilityConfig
	// KYA-OS extension settings (proof_config.go).
	ProofConfig
	// The front door: OAuth 2.1 authorization server (frontdoor.go).
	FrontDoorConfig
}

// Validate checks the configuration; zero values are valid (they mean the
// defaults).
func (c *Config) Validate() error {
	h := c
	switch h.Level {
	case 0, 1, 2, 3:
	default:
		return fmt.Errorf("mcpi: level must be 1, 2 or 3, got %d", h.Level)
	}
	if len(h.TrustedIssuers) == 0 && !h.TrustAuthorizationServer {
		return ErrTrustRequired
	}
	for _, iss := range h.TrustedIssuers {
		if iss == AnyIssuer {
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
	case "", BearerPass, BearerReject:
	default:
		return fmt.Errorf("mcpi: non_delegation_bearer must be pass or reject, got %q", h.NonDelegationBearer)
	}
	if _, err := carrier.ParseSet(h.Carriers); err != nil {
		return err
	}
	if !durationsNonNegative(h.ClockSkew, h.DIDCacheTTL, h.DIDWebTimeout, h.MaxCredentialLifetime) {
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
	if err := h.Level2Config.Validate(); err != nil {
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
	if err := h.validateFrontDoor(); err != nil {
		return err
	}
	if h.AuthorizationServer != nil && h.AuthorizationServer.KYAHTTP != nil && h.Level < 2 {
		return errors.New("mcpi: authorization_server kya_http signs its challenge with the edge's key: set level 2 or 3")
	}
	if err := h.validateProofs(); err != nil {
		return err
	}
	if err := h.validateRateLimits(); err != nil {
		return err
	}
	return h.PolicyConfig.Validate()
}

// IsCarrier reports whether name is a carrier Config.Carriers may list.
func IsCarrier(name string) bool { return carrier.Known(name) }
