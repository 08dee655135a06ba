package identity

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
)

// Level 2 defaults (docs/protocol/mcpi.md#level-2-what-the-upstream-is-told).
const (
	defaultAssertionTTL = assertion.DefaultLifetime
	// DefaultKeyStorageKey is where a generated key set is kept.
	DefaultKeyStorageKey     = "mcpi/edge-keys.json"
	defaultKeyReloadInterval = 30 * time.Second
	// DefaultKeyPublishDelay is twice mcpiverify's refetch interval: a
	// verifier that fetched the JWKS just before a rotation, from a replica
	// that had not yet loaded the new key, may fetch again before it signs.
	DefaultKeyPublishDelay = 20 * time.Second
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

// Config holds the Level 2 settings (identity headers for MCP-I-aware
// upstreams). edge.Config embeds it as Level2Config, so its fields are
// top-level JSON config fields of http.handlers.mcpi. They apply only at
// level 2 and 3.
type Config struct {
	// DID the edge signs as (iss of the assertions, prefix of their kid,
	// id of the served did.json). Default: did:web:<request host>, the
	// port's colon %3A-encoded. Replicas behind one name get the same DID
	// either way; set it when one edge answers under several names.
	EdgeDID string `json:"edge_did,omitempty"`

	// File holding the edge's private signing key (an Ed25519 or P-256
	// private JWK, or PEM). Placeholders such as {env.*} are expanded.
	// Default: a key generated once and kept in Caddy's storage (under
	// key_storage_key), shared by every instance using that storage, and
	// rotated with `caddy mcpi rotate-key`. A key from a file is never
	// rotated by the edge; replacing the file drops the old key at once.
	SigningKey string `json:"signing_key,omitempty"`

	// Algorithm of a generated key: EdDSA or ES256. With signing_key it
	// must match the key if set. Default: EdDSA.
	SigningAlg string `json:"signing_alg,omitempty"`

	// Lifetime of an X-Verified-Delegation assertion, in whole seconds, at
	// most 5m; never past the delegation's own expiry. Default: 60s.
	AssertionTTL duration.Duration `json:"assertion_ttl,omitempty"`

	// Form of X-Verified-Delegation: "jws" (a signed assertion) or "hash"
	// (only "sha256:<hex>" of the presented credential, for upstreams that
	// trust the edge by network position). Default: jws.
	AssertionForm string `json:"assertion_form,omitempty"`

	// Reuse a signed assertion for later requests with the same credential
	// and audience while more than half of its lifetime is left (the jti
	// then repeats). Turning it off signs every request. Default: true.
	AssertionReuse *bool `json:"assertion_reuse,omitempty"`

	// Headers sent upstream: "mcpi" (X-Agent-DID, X-User-DID,
	// X-Verified-Delegation, X-Agent-Reputation-Score), "kya-os"
	// (KYA-OS-Agent-DID, KYA-OS-Delegation-Proof) or "both". Default: mcpi.
	HeaderProfile string `json:"header_profile,omitempty"`

	// Origin of the upstream (scheme://host[:port]), e.g.
	// http://127.0.0.1:9000. It is the aud of the assertions (the host
	// alone for KYA-OS proofs) and where upstream_mcpi auto looks for
	// /.well-known/mcp-i.json. Required for auto. Default aud: the origin
	// of the request.
	Upstream string `json:"upstream,omitempty"`

	// Whether the upstream gets the identity headers: "on" (the operator
	// declares it MCP-I-aware), "off" (never: Level 1 behaviour), or
	// "auto": only while the upstream declares MCP-I support, by serving
	// /.well-known/mcp-i.json or by an MCP-I-Version response header (seen
	// through reverse_proxy). Default: on.
	UpstreamMCPI string `json:"upstream_mcpi,omitempty"`

	// How long what auto learned about the upstream is trusted before it is
	// probed again (in the background). Default: 5m.
	MCPIProbeTTL duration.Duration `json:"mcpi_probe_ttl,omitempty"`

	// Where the reputation score of the agent comes from. Without it,
	// X-Agent-Reputation-Score is never sent.
	Reputation *ReputationConfig `json:"reputation,omitempty"`

	// Storage key of the generated key set. Default: mcpi/edge-keys.json.
	KeyStorageKey string `json:"key_storage_key,omitempty"`

	// How often the key set is reloaded from storage, so that a key rotated
	// by `caddy mcpi rotate-key` or another instance is picked up. Default:
	// 30s.
	KeyReloadInterval duration.Duration `json:"key_reload_interval,omitempty"`

	// How long a rotated-out key stays in the JWKS. It must cover
	// assertion_ttl plus key_reload_interval (an instance may sign with the
	// old key until it reloads). Default: assertion_ttl +
	// key_reload_interval + 60s of clock skew. A stored key set keeps the
	// longest retention any instance asked for.
	KeyRetention duration.Duration `json:"key_retention,omitempty"`

	// How long `caddy mcpi rotate-key` publishes the new key in the JWKS
	// before it signs. Verifiers that refetch the JWKS when they meet an
	// unknown kid, at most once per interval, must be able to refetch
	// within it: set it above their refetch interval plus a second.
	// Default: 20s.
	KeyPublishDelay duration.Duration `json:"key_publish_delay,omitempty"`
}

// Effective settings; they work on an unprovisioned config too.

func (c *Config) assertionTTL() time.Duration {
	if c.AssertionTTL == 0 {
		return defaultAssertionTTL
	}
	return time.Duration(c.AssertionTTL)
}

func (c *Config) keyReloadInterval() time.Duration {
	if c.KeyReloadInterval == 0 {
		return defaultKeyReloadInterval
	}
	return time.Duration(c.KeyReloadInterval)
}

// PublishDelay is the effective key_publish_delay.
func (c *Config) PublishDelay() time.Duration {
	if c.KeyPublishDelay == 0 {
		return DefaultKeyPublishDelay
	}
	return time.Duration(c.KeyPublishDelay)
}

func (c *Config) keyRetention() time.Duration {
	if c.KeyRetention != 0 {
		return time.Duration(c.KeyRetention)
	}
	return c.assertionTTL() + c.keyReloadInterval() + retentionSkew
}

func (c *Config) upstreamMode() string {
	if c.UpstreamMCPI == "" {
		return UpstreamMCPIOn
	}
	return c.UpstreamMCPI
}

func (c *Config) signingAlg() string {
	if c.SigningAlg == "" {
		return AlgEdDSA
	}
	return c.SigningAlg
}

func (c *Config) keyStorageKey() string {
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

// Validate checks the settings; zero values are valid (they mean the
// defaults). edge.Config.Validate runs it at every level.
func (c *Config) Validate() error {
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
	if c.MCPIProbeTTL < 0 || c.KeyReloadInterval < 0 || c.KeyRetention < 0 || c.KeyPublishDelay < 0 {
		return errors.New("mcpi: durations must not be negative")
	}
	if c.KeyReloadInterval != 0 && time.Duration(c.KeyReloadInterval) < time.Second {
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
