package observe

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
)

// authEvents are the label values of caddy_mcpi_authserver_events_total.
var authEvents = labelSet("registration", "consent_approved", "consent_denied", "issued", "revoked", "refresh_reused")

// AuthServerMessage is the audit message of a front door event.
const AuthServerMessage = "mcpi authorization server event"

// AuthServer counts a front door event and writes its audit entry. The
// entry names the client by a short hash of its client_id (a registration
// is self-contained and long), the user and agent by DID, and the scopes;
// never a token or code.
func (rec *Recorder) AuthServer(r *http.Request, e authserver.Event) {
	if rec == nil {
		return
	}
	if m := rec.metrics; m != nil {
		m.authEvents.WithLabelValues(fromSet(authEvents, e.Kind)).Inc()
	}
	if rec.audit == nil || (rec.denialsOnly && e.Kind != "consent_denied" && e.Kind != "refresh_reused" && e.Kind != "revoked") {
		return
	}
	fields := []zap.Field{zap.String("event", e.Kind)}
	if e.ClientID != "" {
		sum := sha256.Sum256([]byte(e.ClientID))
		fields = append(fields, zap.String("client", hex.EncodeToString(sum[:8])))
	}
	if e.UserDID != "" {
		fields = append(fields, zap.String("user_did", e.UserDID))
	}
	if e.AgentDID != "" {
		fields = append(fields, zap.String("agent_did", e.AgentDID))
	}
	if e.Scopes != nil {
		fields = append(fields, zap.Strings("scopes", e.Scopes))
	}
	if r != nil {
		if rec.req.RequestID != nil {
			if id := rec.req.RequestID(r); id != "" {
				fields = append(fields, zap.String("request_id", id))
			}
		}
		if rec.req.ClientIP != nil {
			if ip := rec.req.ClientIP(r); ip != "" {
				fields = append(fields, zap.String("client_ip", ip))
			}
		}
	}
	rec.audit.Info(AuthServerMessage, fields...)
}
