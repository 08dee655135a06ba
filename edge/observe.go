package edge

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
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
	// handshake is the Level 3 mode ("terminate", "proxy") of a handshake
	// or verify call the edge answered or forwarded, call its kind
	// ("handshake", "verify"); both "" for any other request.
	handshake, call string
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

	// Keep only the refusals in the audit log: rejections, per-tool
	// denials and failed handshake calls. Admissions are still counted in
	// caddy_mcpi_decisions_total, but not logged, which saves building and
	// writing one entry per admitted request. Cannot be combined with
	// disable_audit_log.
	AuditDenialsOnly bool `json:"audit_denials_only,omitempty"`
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
	// auditDenialsOnly: leave admissions out of the audit log.
	auditDenialsOnly bool
	// auditNamed keeps the audit logger (audit.go auditLogger); nil before
	// provisioning.
	auditNamed *atomic.Pointer[namedLogger]
}

// provisionObservability runs early in Provision (before the levels), so
// every later part can record. It replaces any state of an earlier
// Provision; collectors already in ctx's registry are reused.
func (h *Handler) provisionObservability() error {
	h.obs.metrics = nil
	if reg := h.registerer; reg != nil {
		m, err := newMetrics(reg)
		if err != nil {
			return err
		}
		h.obs.metrics = m
	}
	h.obs.auditOn = !h.observabilityConfig().DisableAuditLog
	h.obs.auditDenialsOnly = h.observabilityConfig().AuditDenialsOnly
	h.obs.auditNamed = new(atomic.Pointer[namedLogger])
	return nil
}

// recordDecision counts d and writes one audit entry for it. Per-tool
// decisions are counted by metricToolDecision, not here.
func (h *Handler) recordDecision(r *http.Request, d decision) {
	if h == nil {
		return
	}
	if m := h.obs.metrics; m != nil {
		if d.outcome == "admitted" && d.reason == "ok" {
			m.admittedOK.get(func() prometheus.Counter { return m.decisions.WithLabelValues("admitted", "ok") }).Inc()
		} else {
			m.decisions.WithLabelValues(fromSet(decisionOutcomes, d.outcome), fromSet(decisionReasons, d.reason)).Inc()
		}
	}
	h.audit(r, d)
}

// observeVerification records how long one credential verification took
// and whether it succeeded (err nil). raw is the presented credential: on
// a DID resolution failure, the DID method of the issuer it claims labels
// caddy_mcpi_did_resolution_errors_total.
func (h *Handler) observeVerification(elapsed time.Duration, err error, raw []byte) {
	if m := h.metrics(); m != nil {
		if err == nil {
			m.verifiedOK.get(func() prometheus.Observer { return m.verification.WithLabelValues("ok") }).Observe(elapsed.Seconds())
		} else {
			m.verification.WithLabelValues("error").Observe(elapsed.Seconds())
		}
	}
	if errors.Is(err, vc.ErrStatusUnavailable) || errors.Is(err, vc.ErrStatusList) {
		h.metricStatusListError(vc.Reason(err))
	}
	if errors.Is(err, vc.ErrIssuerUnresolved) && h.metrics() != nil {
		h.metricDIDError(claimedDIDMethod(raw), didErrorReason(err))
	}
}

// claimedDIDMethod is the method of the issuer DID raw claims (unverified):
// one the resolver knows, "other" for any other, "unknown" without one. A
// fixed set, so that credentials cannot fill the label's cap.
func claimedDIDMethod(raw []byte) string {
	did, err := didresolver.ParseDID(claimedIssuer(raw))
	if err != nil {
		return "unknown"
	}
	switch did.Method {
	case "key", "web", "jwk":
		return did.Method
	}
	return labelOther
}

// didErrorReason tags a DID resolution failure by the resolver's sentinel
// that err wraps.
func didErrorReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, didresolver.ErrNotFound):
		return "not_found"
	case errors.Is(err, didresolver.ErrFetch):
		return "fetch"
	case errors.Is(err, didresolver.ErrTooLarge):
		return "too_large"
	case errors.Is(err, didresolver.ErrForbiddenAddress):
		return "forbidden_address"
	case errors.Is(err, didresolver.ErrInvalidDocument):
		return "invalid_document"
	case errors.Is(err, didresolver.ErrIDMismatch):
		return "id_mismatch"
	case errors.Is(err, didresolver.ErrInvalidDID):
		return "invalid_did"
	case errors.Is(err, didresolver.ErrUnsupportedMethod):
		return "unsupported_method"
	}
	return labelOther
}

// recordHandshake counts one handshake or verify call that the edge
// answered or forwarded (caddy_mcpi_handshakes_total{mode,result}) and
// writes its audit entry. result is "issued" (a handshake answered or
// forwarded), "verified" (a verify that passed) or a handshakeResult
// failure tag; d is the verified delegation of a verify, else nil; status
// is the HTTP status of the answer, 0 when the upstream's is not known.
// It is not an admission of a request: caddy_mcpi_decisions_total does not
// count it.
func (h *Handler) recordHandshake(r *http.Request, kind challenge.Kind, result string, status int, d *vc.Delegation) {
	if h == nil {
		return
	}
	mode := h.l3.mode
	h.metricHandshake(mode, result)
	dec := decision{outcome: "rejected", reason: result, status: status, delegation: d, handshake: mode, call: "verify"}
	if result == "issued" || result == "verified" {
		dec.outcome = "admitted"
	}
	if kind == challenge.KindHandshake {
		dec.call = "handshake"
	}
	h.audit(r, dec)
}

// handshakeResult is the failure tag of a handshake or verify call, by the
// sentinel err wraps (with challenge's precedence, as its JSON-RPC code).
func handshakeResult(err error) string {
	if errors.Is(err, errUpstreamResponse) || errors.Is(err, errResponseTooLarge) {
		return "upstream_error"
	}
	switch challenge.Code(err) {
	case challenge.CodeParseError:
		return "parse_error"
	case challenge.CodeInvalidRequest:
		return "invalid_request"
	case challenge.CodeMethodNotFound:
		return "method_not_found"
	case challenge.CodeInvalidParams:
		return "invalid_params"
	case challenge.CodeStoreUnavailable:
		return "store_unavailable"
	case challenge.CodeExpired:
		return "expired"
	case challenge.CodeBadProof:
		return "bad_proof"
	case challenge.CodeReplay:
		return "replay"
	case challenge.CodeUntrustedCredential:
		return "untrusted_credential"
	}
	return "internal_error"
}

// validateObservability runs from Validate.
func (h *Handler) validateObservability() error {
	if c := h.observabilityConfig(); c.DisableAuditLog && c.AuditDenialsOnly {
		return errors.New("mcpi: audit_denials_only needs the audit log on (disable_audit_log is set)")
	}
	return nil
}
