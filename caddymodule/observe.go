package caddymodule

import (
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// decision is one admission decision of the edge, for metrics and the audit
// log.
type decision struct {
	// outcome: "admitted" or "rejected" (or "denied" for a per-tool denial).
	outcome string
	// reason: a bounded, stable tag ("ok", "expired", "missing_scope", …).
	reason string
	status int
	// delegation is the verified delegation, nil when none verified.
	delegation *vc.Delegation
	// carrier is where the credential was found ("session" for a handshake
	// session, "" when none).
	carrier string
	// tool is the tools/call name, if any, already reduced to a bounded
	// label by the caller when used as a metric label.
	tool string
}

// ObservabilityConfig holds the metrics and audit log settings. It is
// embedded in Handler, so its fields are top-level JSON config fields of
// http.handlers.mcpi.
type ObservabilityConfig struct {
	// Turn off the audit log: by default every admission decision is
	// logged at INFO by the logger http.handlers.mcpi.audit (outcome,
	// reason, agent and user DIDs, delegation id, issuer, scopes, carrier,
	// host, path, request id, remote IP; never a credential). Metrics are
	// not affected.
	DisableAuditLog bool `json:"disable_audit_log,omitempty"`
}

// auditLoggerName is the name, under the handler's own logger, of the audit
// logger: operators route it with `include http.handlers.mcpi.audit`.
const auditLoggerName = "audit"

// observability is the runtime state for metrics and the audit log.
type observability struct {
	// auditSet: the Caddyfile already gave audit_log.
	auditSet bool

	// metrics is nil when the context has no metrics registry.
	metrics *metrics
	// auditOn: write audit entries (provisioned, and not turned off).
	auditOn bool
}

// provisionObservability runs early in Provision (before the levels), so
// every later part can record. It replaces any state of an earlier
// Provision; collectors already in ctx's registry are reused.
func (h *Handler) provisionObservability(ctx caddy.Context) error {
	h.obs.metrics = nil
	if reg := ctx.GetMetricsRegistry(); reg != nil {
		m, err := newMetrics(reg)
		if err != nil {
			return err
		}
		h.obs.metrics = m
	}
	h.obs.auditOn = !h.observabilityConfig().DisableAuditLog
	return nil
}

// recordDecision counts d and writes one audit entry for it. Per-tool
// decisions are counted by metricToolDecision, not here.
func (h *Handler) recordDecision(r *http.Request, d decision) {
	if h == nil {
		return
	}
	if m := h.obs.metrics; m != nil {
		m.decisions.WithLabelValues(fromSet(decisionOutcomes, d.outcome), fromSet(decisionReasons, d.reason)).Inc()
	}
	h.audit(r, d)
}

// observeVerification records how long one credential verification took
// and whether it succeeded (err nil).
func (h *Handler) observeVerification(elapsed time.Duration, err error) {
	if m := h.metrics(); m != nil {
		m.verification.WithLabelValues(okOrError(err)).Observe(elapsed.Seconds())
	}
	if errors.Is(err, vc.ErrStatusUnavailable) || errors.Is(err, vc.ErrStatusList) {
		h.metricStatusListError(vc.Reason(err))
	}
}

// unmarshalObservability parses an observability subdirective of the mcpi
// block; handled is false for a name it does not know. Syntax:
//
//	audit_log on|off
func (h *Handler) unmarshalObservability(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	switch name {
	case "audit_log":
		if h.obs.auditSet {
			return true, d.Errf("%s already specified", name)
		}
		h.obs.auditSet = true
		var v string
		if !d.AllArgs(&v) {
			return true, d.ArgErr()
		}
		switch v {
		case "on":
			h.observabilityConfig().DisableAuditLog = false
		case "off":
			h.observabilityConfig().DisableAuditLog = true
		default:
			return true, d.Errf("audit_log must be on or off, got %q", v)
		}
		return true, nil
	}
	return false, nil
}
