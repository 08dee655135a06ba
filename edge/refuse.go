package edge

import (
	"net/http"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
)

// refuse is the one function that answers a refused request: err is a
// step's *refusal.Refusal, or an error of the table in rejectionFor. It
// records the request's one decision, logs why at Debug (a bad credential
// is the client's problem, not the operator's) and writes the answer. cred
// is the credential the request presented, if any. The response is
// complete, so ServeNext returns nil after it.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, err error, cred *carrier.Credential) error {
	rf, ok := refusal.As(err)
	if !ok {
		rf = h.cfg.rejectionFor(err).withAudiences(h.cfg.Audiences, h.site.Host(r)).refusal()
	}
	dec := observe.Decision{Outcome: "rejected", Reason: rf.Reason, Status: rf.Status}
	if rf.Decision != nil {
		dec = *rf.Decision
	} else if cred != nil {
		dec.Carrier = cred.Carrier.String()
	}
	h.obs.Decision(r, dec)
	msg := rf.Log
	if msg == "" {
		msg = "request rejected"
	}
	if c := h.logger.Check(zapcore.DebugLevel, msg); c != nil {
		fields := []zap.Field{zap.Int("status", rf.Status), zap.String("reason", rf.Reason)}
		if cred != nil {
			// The issuer is read from the unverified credential: it tells the
			// operator whom to trust or ask, and is never the token itself.
			fields = append(fields, zap.String("carrier", cred.Carrier.String()), zap.String("issuer", observe.ClaimedIssuer(cred.Raw)))
		}
		if rf.Log != "" && rf.Err != nil {
			fields = append(fields, zap.Error(rf.Err))
		}
		c.Write(fields...)
	}
	var resourceMetadata string
	if rf.OAuth != nil && rf.OAuth.Challenge {
		resourceMetadata = h.site.ResourceMetadataURL(r)
	}
	refusal.Write(w, rf, resourceMetadata)
	return nil
}
