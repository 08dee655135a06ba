package caddymodule

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"

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

// observability is the runtime state for metrics and the audit log.
type observability struct{}

// provisionObservability runs early in Provision (before the levels), so
// every later part can record.
func (h *Handler) provisionObservability(ctx caddy.Context) error { return nil }

// recordDecision counts d and writes one audit entry for it.
func (h *Handler) recordDecision(r *http.Request, d decision) {}

// observeVerification records how long one credential verification took
// and whether it succeeded (err nil).
func (h *Handler) observeVerification(elapsed time.Duration, err error) {}
