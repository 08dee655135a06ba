package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Level 2 defaults (MCPI-WIRE §4).
const (
	defaultAssertionTTL      = assertion.DefaultLifetime
	DefaultKeyStorageKey     = "mcpi/edge-keys.json"
	defaultKeyReloadInterval = 30 * time.Second
	// retentionSkew is what a derived key retention adds for the clock skew
	// of the verifiers (mcpiverify tolerates 30s by default).
	retentionSkew       = 60 * time.Second
	defaultMCPIProbeTTL = 5 * time.Minute

	AlgEdDSA = "EdDSA"
	AlgES256 = "ES256"

	FormJWS  = "jws"
	FormHash = "hash"

	ProfileMCPI  = "mcpi"
	ProfileKYAOS = "kya-os"
	ProfileBoth  = "both"

	UpstreamMCPIOn   = "on"
	UpstreamMCPIOff  = "off"
	UpstreamMCPIAuto = "auto"
)

// Level 2 request headers. The X-* ones are also stripped by
// carrier.Reader.StripIdentity; injectIdentity strips them again right before
// setting them, in every spelling.
const (
	hdrAgentDID           = "X-Agent-Did"
	hdrUserDID            = "X-User-Did"
	hdrReputation         = "X-Agent-Reputation-Score"
	hdrVerifiedDelegation = "X-Verified-Delegation"
	hdrKYAOSAgentDID      = "Kya-Os-Agent-Did"
	hdrKYAOSProof         = "Kya-Os-Delegation-Proof"
)

// injectedHeaders are the headers injectIdentity owns, lower case with '-'.
var injectedHeaders = []string{
	"x-agent-did", "x-user-did", "x-agent-reputation-score", "x-verified-delegation",
	"kya-os-agent-did", "kya-os-delegation-proof",
}

// errEdgeIdentity: the edge could not produce its identity headers (no
// signing key, no usable host for its DID, a signing failure). It is the
// edge's fault, not the client's: respond.go maps it to 500.
var errEdgeIdentity = errors.New("edge identity unavailable")

// Level2Config holds the Level 2 settings (identity headers for MCP-I-aware
// upstreams). It is embedded in Handler, so its fields are top-level JSON
// config fields of http.handlers.mcpi. They apply only at level 2 and 3.
type Level2Config struct {
	// DID the edge signs as (iss of the assertions, prefix of their kid,
	// id of the served did.json). Default: did:web:<request host>, the
	// port's colon %3A-encoded. Replicas behind one name get the same DID
	// either way; set it when one edge answers under several names.
	EdgeDID string

	// File holding the edge's private signing key (an Ed25519 or P-256
	// private JWK, or PEM). Placeholders such as {env.*} are expanded.
	// Default: a key generated once and kept in Caddy's storage (under
	// key_storage_key), shared by every instance using that storage, and
	// rotated with `caddy mcpi rotate-key`. A key from a file is never
	// rotated by the edge; replacing the file drops the old key at once.
	SigningKey string

	// Algorithm of a generated key: EdDSA or ES256. With signing_key it
	// must match the key if set. Default: EdDSA.
	SigningAlg string

	// Lifetime of an X-Verified-Delegation assertion, in whole seconds, at
	// most 5m; never past the delegation's own expiry. Default: 60s.
	AssertionTTL time.Duration

	// Form of X-Verified-Delegation: "jws" (a signed assertion) or "hash"
	// (only "sha256:<hex>" of the presented credential, for upstreams that
	// trust the edge by network position). Default: jws.
	AssertionForm string

	// Reuse a signed assertion for later requests with the same credential
	// and audience while more than half of its lifetime is left (the jti
	// then repeats). Turning it off signs every request. Default: true.
	AssertionReuse *bool

	// Headers sent upstream: "mcpi" (X-Agent-DID, X-User-DID,
	// X-Verified-Delegation, X-Agent-Reputation-Score), "kya-os"
	// (KYA-OS-Agent-DID, KYA-OS-Delegation-Proof) or "both". Default: mcpi.
	HeaderProfile string

	// Origin of the upstream (scheme://host[:port]), e.g.
	// http://127.0.0.1:9000. It is the aud of the assertions (the host
	// alone for KYA-OS proofs) and where upstream_mcpi auto looks for
	// /.well-known/mcp-i.json. Required for auto. Default aud: the origin
	// of the request.
	Upstream string

	// Whether the upstream gets the identity headers: "on" (the operator
	// declares it MCP-I-aware), "off" (never: Level 1 behaviour), or
	// "auto": only while the upstream declares MCP-I support, by serving
	// /.well-known/mcp-i.json or by an MCP-I-Version response header (seen
	// through reverse_proxy). Default: on.
	UpstreamMCPI string

	// How long what auto learned about the upstream is trusted before it is
	// probed again (in the background). Default: 5m.
	MCPIProbeTTL time.Duration

	// Where the reputation score of the agent comes from. Without it,
	// X-Agent-Reputation-Score is never sent.
	Reputation *ReputationConfig

	// Storage key of the generated key set. Default: mcpi/edge-keys.json.
	KeyStorageKey string

	// How often the key set is reloaded from storage, so that a key rotated
	// by `caddy mcpi rotate-key` or another instance is picked up. Default:
	// 30s.
	KeyReloadInterval time.Duration

	// How long a rotated-out key stays in the JWKS. It must cover
	// assertion_ttl plus key_reload_interval (an instance may sign with the
	// old key until it reloads). Default: assertion_ttl +
	// key_reload_interval + 60s of clock skew. A stored key set keeps the
	// longest retention any instance asked for.
	KeyRetention time.Duration
}

// level2 is the Level 2 runtime state of a Handler.
type level2 struct {
	// storage, when set before Provision (tests), replaces Caddy's storage.
	storage assertion.Storage
	// rt is nil below level 2 and before Provision.
	rt *l2runtime
}

// l2runtime is everything a provisioned Level 2 handler uses per request.
type l2runtime struct {
	logger *zap.Logger
	ctx    context.Context // cancelled by cleanupLevel2
	cancel context.CancelFunc
	wg     sync.WaitGroup

	lifetime, retention, reloadEvery time.Duration
	alg                              string
	hashForm, reuse                  bool
	mcpiHeaders, kyaHeaders          bool
	fixedDID                         string // configured edge_did
	didDocPath                       string // where did.json is served; "" for none
	aud, kyaAud                      string // configured audiences; "" = from the request
	off                              bool   // upstream_mcpi off

	ks         atomic.Pointer[assertion.KeySet]
	store      assertion.Storage // nil for a key from a file or without storage
	storageKey string
	reloadMu   sync.Mutex
	lastLoad   time.Time // guarded by reloadMu

	signersMu sync.RWMutex
	signers   map[string]*assertion.Signer // by edge DID

	namesMu sync.RWMutex
	names   map[string]*hostNames // by Host, at most maxCachedHosts

	probe *upstreamProbe    // upstream_mcpi auto only
	rep   *reputationSource // nil without a reputation source
}

// Effective settings; they work on an unprovisioned config too.

func (c *Level2Config) assertionTTL() time.Duration {
	if c.AssertionTTL == 0 {
		return defaultAssertionTTL
	}
	return time.Duration(c.AssertionTTL)
}

func (c *Level2Config) keyReloadInterval() time.Duration {
	if c.KeyReloadInterval == 0 {
		return defaultKeyReloadInterval
	}
	return time.Duration(c.KeyReloadInterval)
}

func (c *Level2Config) keyRetention() time.Duration {
	if c.KeyRetention != 0 {
		return time.Duration(c.KeyRetention)
	}
	return c.assertionTTL() + c.keyReloadInterval() + retentionSkew
}

func (c *Level2Config) upstreamMode() string {
	if c.UpstreamMCPI == "" {
		return UpstreamMCPIOn
	}
	return c.UpstreamMCPI
}

func (c *Level2Config) signingAlg() string {
	if c.SigningAlg == "" {
		return AlgEdDSA
	}
	return c.SigningAlg
}

func (c *Level2Config) keyStorageKey() string {
	if c.KeyStorageKey == "" {
		return DefaultKeyStorageKey
	}
	return c.KeyStorageKey
}

// ParseUpstreamOrigin parses the upstream setting: an absolute http(s) URL with
// a host and no path, query or fragment, returned as scheme://host in lower
// case.
func ParseUpstreamOrigin(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("mcpi: upstream %q is not an absolute http(s) URL", s)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("mcpi: upstream %q must be an origin (scheme://host[:port]) without path, query or credentials", s)
	}
	return &url.URL{Scheme: u.Scheme, Host: strings.ToLower(u.Host)}, nil
}

// edgeDIDDocPath returns where the did:web document of did is served:
// /.well-known/did.json for did:web:<host>, /<a>/<b>/did.json for
// did:web:<host>:a:b; ok is false for a DID of another method.
func edgeDIDDocPath(did string) (string, bool) {
	rest, ok := strings.CutPrefix(did, "did:web:")
	if !ok || rest == "" {
		return "", false
	}
	parts := strings.Split(rest, ":")
	if len(parts) == 1 {
		return "/.well-known/did.json", true
	}
	segs := make([]string, 0, len(parts))
	for _, p := range parts[1:] {
		seg, err := url.PathUnescape(p)
		if err != nil || seg == "" {
			return "", false
		}
		segs = append(segs, url.PathEscape(seg))
	}
	return "/" + strings.Join(segs, "/") + "/did.json", true
}

// validateLevel2 runs from Validate.
func (h *Handler) validateLevel2() error {
	c := &h.Level2Config
	if c.EdgeDID != "" {
		if _, err := didresolver.ParseDID(c.EdgeDID); err != nil || strings.ContainsAny(c.EdgeDID, "#?") {
			return fmt.Errorf("mcpi: edge_did %q is not a DID without fragment or query", c.EdgeDID)
		}
	}
	switch c.SigningAlg {
	case "", AlgEdDSA, AlgES256:
	default:
		return fmt.Errorf("mcpi: signing_alg must be EdDSA or ES256, got %q", c.SigningAlg)
	}
	ttl := c.assertionTTL()
	if ttl <= 0 || ttl > assertion.MaxLifetime || ttl%time.Second != 0 {
		return fmt.Errorf("mcpi: assertion_ttl must be whole seconds between 1s and %v, got %v", assertion.MaxLifetime, ttl)
	}
	switch c.AssertionForm {
	case "", FormJWS, FormHash:
	default:
		return fmt.Errorf("mcpi: assertion_form must be jws or hash, got %q", c.AssertionForm)
	}
	switch c.HeaderProfile {
	case "", ProfileMCPI, ProfileKYAOS, ProfileBoth:
	default:
		return fmt.Errorf("mcpi: header_profile must be mcpi, kya-os or both, got %q", c.HeaderProfile)
	}
	if c.Upstream != "" {
		if _, err := ParseUpstreamOrigin(c.Upstream); err != nil {
			return err
		}
	}
	switch c.UpstreamMCPI {
	case "", UpstreamMCPIOn, UpstreamMCPIOff:
	case UpstreamMCPIAuto:
		if c.Upstream == "" {
			return errors.New("mcpi: upstream_mcpi auto needs upstream <origin> (where to look for /.well-known/mcp-i.json)")
		}
	default:
		return fmt.Errorf("mcpi: upstream_mcpi must be on, off or auto, got %q", c.UpstreamMCPI)
	}
	if c.MCPIProbeTTL < 0 || c.KeyReloadInterval < 0 || c.KeyRetention < 0 {
		return errors.New("mcpi: durations must not be negative")
	}
	if c.KeyReloadInterval != 0 && c.KeyReloadInterval < time.Duration(time.Second) {
		return errors.New("mcpi: key_reload_interval must be at least 1s")
	}
	if min := ttl + c.keyReloadInterval(); c.keyRetention() < min {
		return fmt.Errorf("mcpi: key_retention %v must cover assertion_ttl + key_reload_interval (%v)", c.keyRetention(), min)
	}
	if c.SigningKey != "" && c.KeyStorageKey != "" {
		return errors.New("mcpi: signing_key and key_storage_key exclude each other (a key from a file is not stored)")
	}
	if k := c.KeyStorageKey; k != "" && (strings.HasPrefix(k, "/") || strings.Contains(k, "..") || strings.TrimSpace(k) != k) {
		return fmt.Errorf("mcpi: key_storage_key %q must be a relative storage key", k)
	}
	if c.Reputation != nil {
		if err := c.Reputation.validate(); err != nil {
			return err
		}
	}
	return nil
}

// provisionLevel2 runs at the end of Provision. Below level 2 it does
// nothing: no key is loaded and no goroutine started.
func (h *Handler) provisionLevel2() error {
	if h.Level < 2 {
		if h.Level2Config != (Level2Config{}) {
			h.logger.Warn("mcpi: Level 2 settings are ignored below level 2", zap.Int("level", h.Level))
		}
		return nil
	}
	// Validate runs after Provision; a bad config must not touch the
	// storage first.
	if err := h.validateLevel2(); err != nil {
		return err
	}
	c := &h.Level2Config
	rctx, cancel := context.WithCancel(h.ctx)
	rt := &l2runtime{
		logger:      h.logger,
		ctx:         rctx,
		cancel:      cancel,
		lifetime:    c.assertionTTL(),
		retention:   c.keyRetention(),
		reloadEvery: c.keyReloadInterval(),
		alg:         c.signingAlg(),
		hashForm:    c.AssertionForm == FormHash,
		reuse:       c.AssertionReuse == nil || *c.AssertionReuse,
		mcpiHeaders: c.HeaderProfile != ProfileKYAOS,
		kyaHeaders:  c.HeaderProfile == ProfileKYAOS || c.HeaderProfile == ProfileBoth,
		fixedDID:    c.EdgeDID,
		off:         c.upstreamMode() == UpstreamMCPIOff,
		signers:     make(map[string]*assertion.Signer),
	}
	h.l2.rt = rt // from here on, cleanupLevel2 has something to release
	if rt.fixedDID == "" {
		rt.didDocPath = "/.well-known/did.json"
	} else if p, ok := edgeDIDDocPath(rt.fixedDID); ok {
		rt.didDocPath = p
	}
	if c.Upstream != "" {
		u, _ := ParseUpstreamOrigin(c.Upstream) // checked by validateLevel2
		rt.aud, rt.kyaAud = u.String(), u.Host
	}

	if err := rt.loadKeys(rctx, c, h.l2.storage); err != nil {
		return err
	}
	if rt.fixedDID != "" {
		// Fail at startup, not on the first request.
		if _, err := rt.signerFor(rt.fixedDID); err != nil {
			return fmt.Errorf("mcpi: edge signer: %v", err)
		}
	}
	if c.Reputation != nil {
		rep, err := newReputationSource(rctx, c.Reputation, rt.logger)
		if err != nil {
			return err
		}
		rt.rep = rep
	}
	if c.upstreamMode() == UpstreamMCPIAuto {
		u, _ := ParseUpstreamOrigin(c.Upstream)
		ttl := time.Duration(c.MCPIProbeTTL)
		if ttl == 0 {
			ttl = defaultMCPIProbeTTL
		}
		rt.probe = newUpstreamProbe(rctx, &rt.wg, u, ttl, rt.logger)
		rt.probe.start() // learn before the first request, if we can
	}
	return nil
}

// signerFor returns the Signer for an edge DID, creating it on first use.
// Derived DIDs (one per Host) are bounded: past maxSigners one is dropped.
func (rt *l2runtime) signerFor(did string) (*assertion.Signer, error) {
	rt.signersMu.RLock()
	s := rt.signers[did]
	rt.signersMu.RUnlock()
	if s != nil {
		return s, nil
	}
	rt.signersMu.Lock()
	defer rt.signersMu.Unlock()
	if s := rt.signers[did]; s != nil {
		return s, nil
	}
	cacheSize := assertion.DefaultReuseCacheSize
	if rt.fixedDID == "" {
		cacheSize = derivedReuseCacheSize
		if len(rt.signers) >= maxSigners {
			for k := range rt.signers {
				delete(rt.signers, k)
				break
			}
		}
	}
	s, err := assertion.New(rt.ks.Load(), did,
		assertion.WithLifetime(rt.lifetime),
		assertion.WithReuse(rt.reuse),
		assertion.WithReuseCacheSize(cacheSize))
	if err != nil {
		return nil, err
	}
	rt.signers[did] = s
	return s, nil
}

const (
	// maxSigners bounds the per-Host signers when the edge DID is derived
	// from the Host; derivedReuseCacheSize bounds each one's reuse cache.
	maxSigners            = 32
	derivedReuseCacheSize = 1024
)

// edgeDID is the configured edge DID, else did:web:<host> (lower case, the
// port's colon %3A-encoded, as requestAudiences derives it).
func (rt *l2runtime) edgeDID(host string) (string, error) {
	if rt.fixedDID != "" {
		return rt.fixedDID, nil
	}
	if host == "" || strings.ContainsAny(host, "#?/ ") {
		return "", fmt.Errorf("%w: no usable Host for the edge DID", errEdgeIdentity)
	}
	return "did:web:" + strings.ReplaceAll(strings.ToLower(host), ":", "%3A"), nil
}

// hostNames are the names injectIdentity uses for one Host, kept so that a
// request does not build them again.
type hostNames struct {
	did  string    // edgeDID(host)
	host string    // the host in lower case (the KYA-OS audience)
	aud  [2]string // the assertion audience over http and over https
}

// namesFor returns the names for host, built on first use. Hosts are the
// client's choice, so at most maxCachedHosts are kept.
func (rt *l2runtime) namesFor(host string) (*hostNames, error) {
	rt.namesMu.RLock()
	n := rt.names[host]
	rt.namesMu.RUnlock()
	if n != nil {
		return n, nil
	}
	did, err := rt.edgeDID(host)
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(host)
	n = &hostNames{did: did, host: lower, aud: [2]string{"http://" + lower, "https://" + lower}}
	rt.namesMu.Lock()
	if len(rt.names) >= maxCachedHosts || rt.names == nil {
		rt.names = make(map[string]*hostNames, maxCachedHosts)
	}
	rt.names[host] = n
	rt.namesMu.Unlock()
	return n, nil
}

// injectIdentity sets the Level 2 headers on the request going upstream.
// Runs only after d verified and the client's identity headers were
// stripped. An upstream that has not declared MCP-I support gets nothing
// (Level 1 behaviour).
func (h *Handler) injectIdentity(r *http.Request, d *vc.Delegation) error {
	rt := h.l2.rt
	if rt == nil {
		return nil
	}
	// Strip again, every spelling, whatever happens next: only the edge's
	// own values may reach the upstream.
	stripInjected(r.Header)
	if rt.off {
		return nil
	}
	if rt.probe != nil {
		rt.probe.observe(r, h.hooks.UpstreamHeader)
		if !rt.probe.declared(r.Context()) {
			return nil
		}
	}
	names, err := rt.namesFor(h.serviceHost(r))
	if err != nil {
		return err
	}
	signer, err := rt.signerFor(names.did)
	if err != nil {
		return fmt.Errorf("%w: %v", errEdgeIdentity, err)
	}
	hdr := r.Header
	if rt.mcpiHeaders {
		var proof string
		if rt.hashForm {
			proof = d.HashRef()
		} else {
			aud := rt.aud
			if aud == "" {
				aud = names.aud[0]
				if h.requestScheme(r) == "https" {
					aud = names.aud[1]
				}
			}
			if proof, err = signer.Sign(d, aud); err != nil {
				return assertionSignError(err)
			}
		}
		// One backing array for the three values, each capped so that
		// adding a value to one header copies it instead of writing over
		// the next.
		vals := []string{d.AgentDID, d.UserDID, proof}
		hdr[hdrAgentDID] = vals[0:1:1]
		hdr[hdrUserDID] = vals[1:2:2]
		hdr[hdrVerifiedDelegation] = vals[2:3:3]
	}
	if rt.kyaHeaders {
		aud := rt.kyaAud
		if aud == "" {
			aud = names.host
		}
		proof, err := signer.SignKYAOSProof(d, aud, nil)
		if err != nil {
			return assertionSignError(err)
		}
		hdr[hdrKYAOSAgentDID] = []string{d.AgentDID}
		hdr[hdrKYAOSProof] = []string{proof}
	}
	if rt.rep != nil {
		if score, ok := rt.rep.score(r.Context(), d.AgentDID); ok {
			hdr[hdrReputation] = []string{score}
		}
	}
	return nil
}

// assertionSignError keeps the errors the client caused (an expired or unusable
// delegation) and makes every other one the edge's.
func assertionSignError(err error) error {
	if errors.Is(err, assertion.ErrDelegationExpired) || errors.Is(err, assertion.ErrInvalidDelegation) {
		return err
	}
	return fmt.Errorf("%w: %v", errEdgeIdentity, err)
}

// stripInjected deletes every spelling of the headers injectIdentity sets.
func stripInjected(h http.Header) {
	for k := range h {
		if len(k) < len("x-user-did") {
			continue
		}
		switch k[0] {
		case 'x', 'X', 'k', 'K':
		default:
			continue
		}
		if carrier.HeaderIs(k, injectedHeaders...) {
			delete(h, k)
		}
	}
}
