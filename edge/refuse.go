package edge

import (
	"encoding/json"
	"net/http"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
)

// The handler writes its refusals itself instead of returning
// caddyhttp.Error: MCP clients need the WWW-Authenticate challenge (it
// points them at the RFC 9728 document) and the JSON body, and Caddy's
// default error handling sends only a status line.

// refuse is the one function that answers a refused request: err is a
// step's *refusal.Refusal, or an error of the table in rejectionFor. It
// records the request's one decision, logs why at Debug (a bad credential
// is the client's problem, not the operator's) and writes the answer. cred
// is the credential the request presented, if any. The response is
// complete, so ServeNext returns nil after it.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, err error, cred *carrier.Credential) error {
	rf, ok := refusal.As(err)
	if !ok {
		rf = h.withAudiences(r, h.cfg.rejectionFor(err)).refusal()
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
	h.writeRefusal(w, r, rf)
	return nil
}

// errorBody is the JSON body of an RFC 6750 refusal (RFC 6750 §3 names).
type errorBody struct {
	Error            string   `json:"error"`
	ErrorDescription string   `json:"error_description"`
	Reason           string   `json:"reason,omitempty"`
	Scope            string   `json:"scope,omitempty"`
	Audiences        []string `json:"audiences,omitempty"`
}

// writeRefusal writes rf.
func (h *Handler) writeRefusal(w http.ResponseWriter, r *http.Request, rf *refusal.Refusal) {
	hdr := w.Header()
	for k, v := range rf.Header {
		hdr[k] = v
	}
	switch o := rf.OAuth; {
	case o != nil:
		if o.Challenge {
			hdr.Set("WWW-Authenticate", bearerChallenge(o, h.site.ResourceMetadataURL(r)))
			if o.DPoPError != "" {
				hdr.Add("WWW-Authenticate", dpopChallenge(o, rf.Reason))
			}
		}
		body, _ := json.Marshal(errorBody{o.Code, o.Description, o.VCReason, o.Scope, o.Audiences})
		writeJSON(w, rf.Status, body, "no-store")
	case rf.Body != nil:
		writeJSON(w, rf.Status, rf.Body, "no-store")
	default:
		hdr.Set("Cache-Control", "no-store")
		w.WriteHeader(rf.Status)
	}
}

// bearerChallenge builds the Bearer challenge. Without a presented
// credential it carries no error code (RFC 6750 §3.1: a request without
// credentials is just asked for them).
func bearerChallenge(o *refusal.OAuth, resourceMetadata string) string {
	var b strings.Builder
	b.WriteString("Bearer ")
	if o.VCReason != "" || o.Code == "insufficient_scope" {
		b.WriteString(`error="` + quoteEscape(o.Code) + `", `)
		if o.Scope != "" {
			b.WriteString(`scope="` + quoteEscape(o.Scope) + `", `)
		}
		if o.VCReason != "" {
			b.WriteString(`error_description="` + quoteEscape(o.VCReason) + `", `)
		}
	}
	b.WriteString(`resource_metadata="` + quoteEscape(resourceMetadata) + `"`)
	return b.String()
}
