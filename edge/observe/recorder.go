// Package observe records the edge's decisions: Prometheus metrics with
// bounded labels and the audit log, one entry per decision. It never logs a
// credential, token, nonce or header value.
package observe

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Decision is one decision of the edge about a request, for metrics and the
// audit log.
type Decision struct {
	// Outcome: "admitted" or "rejected" (or "denied" for a per-tool denial).
	Outcome string
	// Reason: a bounded, stable tag ("ok", "expired", "missing_scope", …).
	Reason string
	Status int
	// Delegation is the verified delegation, nil when none verified.
	Delegation *vc.Delegation
	// Carrier is where the credential was found ("session" for a handshake
	// session, "" when none).
	Carrier string
	// Tool is the tools/call name, if any.
	Tool string
	// Rule names the operator's rule that refused the call, if one did.
	Rule string
	// Handshake is the Level 3 mode ("terminate", "proxy") of a handshake
	// or verify call the edge answered or forwarded, Call its kind
	// ("handshake", "verify"); both "" for any other request.
	Handshake, Call string
}

// Request tells the recorder what the host knows of a request, for its
// audit entry. Every func is optional.
type Request struct {
	// Upstream names the service the request is for.
	Upstream func(*http.Request) string
	// RequestID is the host's id of the request.
	RequestID func(*http.Request) string
	// ClientIP is the client's address as the host established it.
	ClientIP func(*http.Request) string
	// Original is the method and URL as the client sent them (nil URL: as
	// the request has them).
	Original func(*http.Request) (string, *url.URL)
}

// Options configure a Recorder.
type Options struct {
	// Registerer receives the collectors (those already registered there
	// are reused); nil: no metrics.
	Registerer prometheus.Registerer
	// Logger is the edge's logger; the audit log is its child "audit".
	// Nil: no audit log.
	Logger *zap.Logger
	// DisableAuditLog turns the audit log off; AuditDenialsOnly keeps only
	// the refusals in it.
	DisableAuditLog, AuditDenialsOnly bool
	Request                           Request
}

// AuditLoggerName is the name, under the edge's logger, of the audit
// logger: operators route it with `include http.handlers.mcpi.audit`.
const AuditLoggerName = "audit"

// Recorder counts and logs decisions. A nil *Recorder records nothing.
type Recorder struct {
	// metrics is nil without a registry.
	metrics *metrics
	// audit is nil when the audit log is off.
	audit       *zap.Logger
	denialsOnly bool
	req         Request
	// queue takes the audit entries off the request path; nil when the
	// audit log is off.
	queue *auditQueue
	// idPrefix and seq make the request_id of an entry whose request has
	// no id of the host's (auditID).
	idPrefix string
	seq      atomic.Uint64
}

// New registers the collectors and sets up the audit logger.
func New(o Options) (*Recorder, error) {
	r := &Recorder{denialsOnly: o.AuditDenialsOnly, req: o.Request, idPrefix: newAuditIDPrefix()}
	if o.Registerer != nil {
		m, err := newMetrics(o.Registerer)
		if err != nil {
			return nil, err
		}
		r.metrics = m
	}
	if o.Logger != nil && !o.DisableAuditLog && o.Logger.Core().Enabled(zapcore.InfoLevel) {
		r.audit = o.Logger.Named(AuditLoggerName)
		var dropped func()
		if m := r.metrics; m != nil {
			dropped = m.auditDropped.Inc
		}
		r.queue = newAuditQueue(r.writeAuditEntry, o.Logger, dropped)
	}
	return r, nil
}

// Close writes the audit entries still queued and returns when they are
// written (or, if the log takes no writes, after a bound, with an error).
// Entries recorded after Close are written at once. Safe to call more than
// once and on a nil Recorder.
func (rec *Recorder) Close() error {
	if rec == nil || rec.queue == nil {
		return nil
	}
	return rec.queue.close(auditCloseWait)
}

// Flush returns when the audit entries recorded so far are written (or, if
// the log takes no writes, after a bound, with an error).
func (rec *Recorder) Flush() error {
	if rec == nil || rec.queue == nil {
		return nil
	}
	return rec.queue.flush(auditCloseWait)
}

// IsReason reports whether reason is one of the decision reasons counted
// under their own label (others count as "other").
func IsReason(reason string) bool { return decisionReasons[reason] }

// Decision counts d and writes one audit entry for it. Per-tool decisions
// are counted by ToolDecision, not here.
func (rec *Recorder) Decision(r *http.Request, d Decision) {
	if rec == nil {
		return
	}
	if m := rec.metrics; m != nil {
		if d.Outcome == "admitted" && d.Reason == "ok" {
			m.admittedOK.get(func() prometheus.Counter { return m.decisions.WithLabelValues("admitted", "ok") }).Inc()
		} else {
			m.decisions.WithLabelValues(fromSet(decisionOutcomes, d.Outcome), fromSet(decisionReasons, d.Reason)).Inc()
		}
	}
	traceDecision(r, d)
	rec.writeAudit(r, d)
}

// Verification records how long one credential verification took and
// whether it succeeded (err nil). raw is the presented credential: on a DID
// resolution failure, the DID method of the issuer it claims labels
// caddy_mcpi_did_resolution_errors_total.
func (rec *Recorder) Verification(elapsed time.Duration, err error, raw []byte) {
	m := rec.metricsOrNil()
	if m == nil {
		return
	}
	if err == nil {
		m.verifiedOK.get(func() prometheus.Observer { return m.verification.WithLabelValues("ok") }).Observe(elapsed.Seconds())
	} else {
		m.verification.WithLabelValues("error").Observe(elapsed.Seconds())
	}
	if errors.Is(err, vc.ErrStatusUnavailable) || errors.Is(err, vc.ErrStatusList) {
		rec.StatusListError(vc.Reason(err))
	}
	if errors.Is(err, vc.ErrIssuerUnresolved) {
		rec.DIDError(claimedDIDMethod(raw), didErrorReason(err))
	}
}

// Handshake counts one handshake or verify call that the edge answered or
// forwarded (caddy_mcpi_handshakes_total{mode,result}) and writes its audit
// entry. mode is the Level 3 mode, call "handshake" or "verify"; result is
// "issued" (a handshake answered or forwarded), "verified" (a verify that
// passed) or a failure tag; d is the verified delegation of a verify, else
// nil; status is the HTTP status of the answer, 0 when the upstream's is
// not known. It is not an admission of a request:
// caddy_mcpi_decisions_total does not count it.
func (rec *Recorder) Handshake(r *http.Request, mode, call, result string, status int, d *vc.Delegation) {
	if rec == nil {
		return
	}
	rec.countHandshake(mode, result)
	dec := Decision{Outcome: "rejected", Reason: result, Status: status, Delegation: d, Handshake: mode, Call: call}
	if result == "issued" || result == "verified" {
		dec.Outcome = "admitted"
	}
	traceDecision(r, dec)
	rec.writeAudit(r, dec)
}

// claimedDIDMethod is the method of the issuer DID raw claims (unverified):
// one the resolver knows, "other" for any other, "unknown" without one. A
// fixed set, so that credentials cannot fill the label's cap.
func claimedDIDMethod(raw []byte) string {
	did, err := didresolver.ParseDID(ClaimedIssuer(raw))
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

// ClaimedIssuer returns the issuer a credential claims (JWT iss, JSON VC
// issuer), unverified, cut to a length fit for a log line.
func ClaimedIssuer(raw []byte) string {
	var iss string
	if len(raw) > 0 && raw[0] == '{' {
		var v struct {
			Issuer json.RawMessage `json:"issuer"`
		}
		if json.Unmarshal(raw, &v) == nil && len(v.Issuer) > 0 {
			if json.Unmarshal(v.Issuer, &iss) != nil {
				var o struct {
					ID string `json:"id"`
				}
				if json.Unmarshal(v.Issuer, &o) == nil {
					iss = o.ID
				}
			}
		}
	} else if parts := strings.Split(string(raw), "."); len(parts) == 3 {
		if p, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "=")); err == nil {
			var c struct {
				Iss string `json:"iss"`
			}
			if json.Unmarshal(p, &c) == nil {
				iss = c.Iss
			}
		}
	}
	if len(iss) > 256 {
		iss = iss[:256]
	}
	return iss
}
