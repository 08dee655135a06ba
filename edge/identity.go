package edge

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/edge/identity"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Level 2 lives in edge/identity; Config embeds its settings, and these are
// their names in edge's API.
type (
	// Level2Config holds the Level 2 settings (identity.Config).
	Level2Config = identity.Config
	// ReputationConfig says where X-Agent-Reputation-Score comes from.
	ReputationConfig = identity.ReputationConfig
)

// Values of Level2Config's settings.
const (
	DefaultKeyStorageKey = identity.DefaultKeyStorageKey
	// DefaultKeyPublishDelay is key_publish_delay's default.
	DefaultKeyPublishDelay = identity.DefaultKeyPublishDelay

	AlgEdDSA = identity.AlgEdDSA
	AlgES256 = identity.AlgES256

	FormJWS  = identity.FormJWS
	FormHash = identity.FormHash

	ProfileMCPI  = identity.ProfileMCPI
	ProfileKYAOS = identity.ProfileKYAOS
	ProfileBoth  = identity.ProfileBoth

	UpstreamMCPIOn   = identity.UpstreamMCPIOn
	UpstreamMCPIOff  = identity.UpstreamMCPIOff
	UpstreamMCPIAuto = identity.UpstreamMCPIAuto
)

// ParseUpstreamOrigin parses the upstream setting (identity.ParseUpstreamOrigin).
var ParseUpstreamOrigin = identity.ParseUpstreamOrigin

// ParseReputationScore reads a reputation score (identity.ParseReputationScore).
var ParseReputationScore = identity.ParseReputationScore

// GenerateEdgeKey makes a new edge signing key for alg (identity.GenerateKey).
var GenerateEdgeKey = identity.GenerateKey

// provisionIdentity builds Level 2. Below level 2 it does nothing: no key
// is loaded and no goroutine started.
func (h *Handler) provisionIdentity() error {
	if h.cfg.Level < 2 {
		if h.cfg.Level2Config != (Level2Config{}) {
			h.logger.Warn("mcpi: Level 2 settings are ignored below level 2", zap.Int("level", h.cfg.Level))
		}
		return nil
	}
	id, err := identity.New(h.ctx, h.cfg.Level2Config,
		identity.WithLogger(h.logger),
		identity.WithStorage(h.keyStorage),
		// The assertion for a credential ends when the verifier stops
		// accepting it, not before: both apply the same skew.
		identity.WithClockSkew(time.Duration(h.cfg.ClockSkew)),
		identity.WithHost(h.site.Host),
		identity.WithScheme(h.site.Scheme),
		identity.WithUpstreamHeader(h.hooks.UpstreamHeader),
		// At level 3 the did.json also announces the handshake endpoints.
		identity.WithServices(h.docs.Services))
	if err != nil {
		return err
	}
	h.ident = id
	return nil
}

// closeIdentity stops Level 2's background work.
func (h *Handler) closeIdentity() error {
	if h.ident == nil {
		return nil
	}
	return h.ident.Close()
}

// injectIdentity sets the Level 2 headers for d on r; below level 2 it
// does nothing.
func (h *Handler) injectIdentity(r *http.Request, d *vc.Delegation) error {
	if h.ident == nil {
		return nil
	}
	return h.ident.Inject(r, d)
}

// identify tells the host (hooks.Identity) and, from Level 2, the upstream
// (ident's headers) who is calling as d.
func identify(hooks Hooks, ident *identity.Identity) func(*http.Request, *vc.Delegation) error {
	return func(r *http.Request, d *vc.Delegation) error {
		if hooks.Identity != nil && d != nil {
			hooks.Identity(r, d)
		}
		if ident == nil {
			return nil
		}
		return ident.Inject(r, d)
	}
}
