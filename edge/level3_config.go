package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/edge/level3"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/site"
	"github.com/mcpi-edge/caddy-mcpi/edge/wellknown"
	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
	"github.com/mcpi-edge/caddy-mcpi/vc"
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

// provisionNonceStore sets up h.nonces: the store given to New, else one
// of the handler's own. It runs before the verifier is built, which uses
// the store as its replay guard, and before provisionLevel3.
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
	h.nonces = &measuredNonceStore{store: s, name: name, obs: h.obs}
}

// sessionBinder returns the nonce store as a SessionBinder (measured), or
// an error when the configured store module cannot hold bindings.
func (h *Handler) sessionBinder() (challenge.OwnedBinder, error) {
	var store challenge.NonceStore = h.nonces
	name := "nonce_store"
	if m, ok := store.(*measuredNonceStore); ok {
		store, name = m.store, m.name
	}
	b, ok := store.(challenge.SessionBinder)
	if !ok {
		return nil, fmt.Errorf("mcpi: nonce store %s cannot keep handshake sessions (`handshake proxy` needs memory or redis)", name)
	}
	return &measuredBinder{binder: b, name: name, obs: h.obs}, nil
}

// provisionLevel3 builds the Level 3 step (edge/level3) after Level 2,
// with the store that provisionNonceStore loaded; below level 3 h.l3
// stays nil.
func (h *Handler) provisionLevel3() error {
	if h.cfg.Level < 3 {
		return nil
	}
	c := &h.cfg
	if c.Handshake == "" {
		c.Handshake = HandshakeTerminate
	}
	if c.HandshakePath == "" {
		c.HandshakePath = defaultHandshakePath
	}
	if c.VerifyPath == "" {
		c.VerifyPath = defaultVerifyPath
	}
	if c.ChallengeTTL == 0 {
		c.ChallengeTTL = Duration(challenge.DefaultChallengeTTL)
	}
	if c.HandshakeSkew == 0 {
		c.HandshakeSkew = Duration(challenge.DefaultSkew)
	}
	if c.LegacyHandshake == "" {
		c.LegacyHandshake = LegacyVerify
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = Duration(handshake.DefaultSessionTTL)
	}
	lc := level3.Config{
		Mode:                c.Handshake,
		HandshakePath:       c.HandshakePath,
		VerifyPath:          c.VerifyPath,
		HandshakeMethod:     c.HandshakeMethod,
		VerifyMethod:        c.VerifyMethod,
		ChallengeTTL:        time.Duration(c.ChallengeTTL),
		HandshakeSkew:       time.Duration(c.HandshakeSkew),
		SessionTTL:          time.Duration(c.SessionTTL),
		ClockSkew:           time.Duration(c.ClockSkew),
		LegacyPass:          c.LegacyHandshake == LegacyPass,
		RejectForeignBearer: c.NonDelegationBearer == BearerReject,
		MaxBody:             c.MaxBodySize,
		Policy:              c.acceptancePolicy(),
		TrustedIssuers:      c.TrustedIssuers,
		Audiences:           c.Audiences,
		RequireAudience:     c.RequireAudience,
		RequiredScopes:      c.RequiredScopes,
	}
	parts := level3.Parts{
		Ctx: h.ctx, KeyStorage: h.keyStorage, Store: h.nonces,
		// The agent DIDs resolve through the handler's DID cache.
		Resolver: observe.TraceResolver(h.didCache), Verifier: h.verifier,
		Site: h.site, Carriers: h.carriers, Recorder: h.obs, Logger: h.logger,
		Checks: h.admit.CallChecks, Identified: h.hooks.Identity,
	}
	if h.ident != nil {
		parts.Inject = h.ident.Inject
	}
	if c.Handshake == HandshakeProxy {
		if c.DiscoveryTTL == 0 {
			c.DiscoveryTTL = Duration(defaultDiscoveryTTL)
		}
		lc.DiscoveryTTL = time.Duration(c.DiscoveryTTL)
		lc.AllowPrivateDIDWeb = c.AllowPrivateDIDWeb
		lc.UpstreamDID = c.UpstreamDID
		lc.HandshakeEndpoint, lc.VerifyEndpoint = c.HandshakeEndpoint, c.VerifyEndpoint
		if c.Upstream != "" {
			// Level 2's upstream origin (validated there).
			u, err := identity.ParseUpstreamOrigin(c.Upstream)
			if err != nil {
				return err
			}
			lc.Upstream = u
		}
		binder, err := h.sessionBinder()
		if err != nil {
			return err
		}
		parts.Binder = binder
	}
	l, err := level3.New(lc, parts)
	if err != nil {
		return err
	}
	h.l3 = l
	return nil
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

// ValidEndpoint checks a handshake_endpoint or verify_endpoint setting: a
// path, or an absolute http(s) URL.
func ValidEndpoint(s string) error {
	_, err := handshake.ParseEndpoint(s)
	return err
}

// acceptancePolicy fingerprints what decides, on this handler, whether a
// credential is accepted and that a session does not re-check in full:
// the level, the trust list, the configured audiences (none: derived from
// each request's Host) and require_audience, require_presentation, the
// chain depth and the Linked Data proof settings. Lists are sorted and
// deduplicated, so that the order of a config does not matter. It names
// the handler's session key (handshake.DeriveKey) and scopes its proxy-mode
// session bindings (bindingKey). required_scopes is left out: it is
// checked on every use (checkSessionRoute), and routes that differ only
// in it keep sharing sessions. Call it after Provision set the defaults.
func (cfg *Config) acceptancePolicy() string {
	set := func(in []string) []string {
		if len(in) == 0 {
			return nil // absent and empty are one
		}
		out := slices.Clone(in)
		slices.Sort(out)
		return slices.Compact(out)
	}
	var chainFetchAllow []string
	if cfg.ChainFetch != nil {
		// Fetching on with no prefix is refused by Validate; "on" is
		// marked so that it never equals off.
		chainFetchAllow = append([]string{"on"}, set(cfg.ChainFetch.Allow)...)
	}
	var contexts []string
	for u := range cfg.JSONLDContexts {
		contexts = append(contexts, u)
	}
	p := struct {
		Level               int      `json:"level"`
		Trust               []string `json:"trust"`
		Audiences           []string `json:"aud"`
		RequireAudience     bool     `json:"require_aud"`
		RequirePresentation bool     `json:"require_vp"`
		ChainDepth          int      `json:"chain_depth"`
		JSONLD              bool     `json:"jsonld"`
		JSONLDContexts      []string `json:"jsonld_contexts"`
		// What else decides whether a credential is accepted: a route
		// more lenient in any of these must not open sessions that a
		// stricter one takes.
		ClockSkew          int64    `json:"clock_skew"`
		StatusStaleIfError int64    `json:"status_stale"`
		AllowPrivateDIDWeb bool     `json:"private_did_web"`
		ChainFetch         []string `json:"chain_fetch"`
	}{
		Level:               cfg.Level,
		Trust:               set(cfg.TrustedIssuers),
		Audiences:           set(cfg.Audiences),
		RequireAudience:     cfg.RequireAudience,
		RequirePresentation: cfg.RequirePresentation,
		ChainDepth:          vc.MaxChainDepth,
		JSONLD:              !cfg.DisableJSONLD,
		JSONLDContexts:      set(contexts),
		ClockSkew:           int64(cfg.ClockSkew),
		StatusStaleIfError:  int64(cfg.StatusStaleIfError),
		AllowPrivateDIDWeb:  cfg.AllowPrivateDIDWeb,
		ChainFetch:          chainFetchAllow,
	}
	b, _ := json.Marshal(p) // strings, ints and bools only
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
