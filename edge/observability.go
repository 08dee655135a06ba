package edge

import (
	"errors"
	"net/http"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
)

// ObservabilityConfig holds the metrics and audit log settings. It is
// embedded in Config, so its fields are top-level JSON config fields of
// http.handlers.mcpi.
type ObservabilityConfig struct {
	// Turn off the audit log: by default every admission decision is
	// logged at INFO by the logger http.handlers.mcpi.audit (outcome,
	// reason, agent and user DIDs, delegation id, issuer, scopes, carrier,
	// host, path, request id, remote IP; never a credential). Metrics are
	// not affected.
	DisableAuditLog bool `json:"disable_audit_log,omitempty"`

	// Keep only the refusals in the audit log: rejections, per-tool
	// denials and failed handshake calls. Admissions are still counted in
	// caddy_mcpi_decisions_total, but not logged, which saves building and
	// writing one entry per admitted request. Cannot be combined with
	// disable_audit_log.
	AuditDenialsOnly bool `json:"audit_denials_only,omitempty"`
}

// provisionObservability runs first in New, so every later part can
// record. Collectors already in the registry are reused.
func (h *Handler) provisionObservability() error {
	rec, err := observe.New(observe.Options{
		Registerer:       h.registerer,
		Logger:           h.logger,
		DisableAuditLog:  h.cfg.DisableAuditLog,
		AuditDenialsOnly: h.cfg.AuditDenialsOnly,
		Request: observe.Request{
			Upstream:  h.upstreamName,
			RequestID: h.hooks.RequestID,
			ClientIP:  h.hooks.ClientIP,
			Original:  h.hooks.Original,
		},
	})
	if err != nil {
		return err
	}
	h.obs = rec
	return nil
}

// validateObservability runs from Validate.
func (cfg *Config) validateObservability() error {
	if c := &cfg.ObservabilityConfig; c.DisableAuditLog && c.AuditDenialsOnly {
		return errors.New("mcpi: audit_denials_only needs the audit log on (disable_audit_log is set)")
	}
	return nil
}

// upstreamName names the service the request is for: the configured
// upstream origin (the aud of the Level 2 assertion), else the origin the
// request was addressed to, which is the assertion's default aud. The
// edge decides before reverse_proxy picks a backend, so no backend address
// is known here; the access log has it.
func (h *Handler) upstreamName(r *http.Request) string {
	if h.cfg.Upstream != "" {
		return h.cfg.Upstream
	}
	// Built when the host changes, not for every audit entry.
	if h.site.Scheme(r) == "https" {
		return h.httpsOrigin.Get(h.site.Host(r), func(host string) string { return "https://" + host })
	}
	return h.httpOrigin.Get(h.site.Host(r), func(host string) string { return "http://" + host })
}
