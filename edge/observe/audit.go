package observe

import (
	"net"
	"net/http"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The audit log: one INFO entry per admission decision, from the logger
// http.handlers.mcpi.audit. Operators send it to its own file with
//
//	log mcpi_audit {
//		include http.handlers.mcpi.audit
//		output file /var/log/caddy/mcpi-audit.log
//		format json
//	}
//
// (the Caddyfile then keeps it out of the default log), keep only the
// refusals with `audit_log denials`, or drop it with `audit_log off`.
//
// Level 3 handshake and verify calls the edge answers or forwards get an
// entry too (Recorder.Handshake), with the handshake mode and the call.
//
// An entry says who was admitted or refused and why, never with what: no
// token, signature, nonce, presentation or header value is ever written.
// The DIDs are those of the verified delegation; a rejected request has
// none (what an unverified credential claims is not evidence).

// AuditMessage is the message of every audit entry.
const AuditMessage = "mcpi decision"

// MaxAuditTool bounds the tool name in an entry: it is the client's choice;
// longer names are cut.
const MaxAuditTool = 128

// auditFields recycles the field slices of audit entries. A zap core
// encodes (or, like zaptest's observer, copies) the fields during Write and
// keeps no reference to the slice, so it can be reused once Write returns:
// the entry then costs no allocation of its own.
var auditFields = sync.Pool{New: func() any {
	f := make([]zap.Field, 0, maxAuditFields)
	return &f
}}

// maxAuditFields is the most fields an entry has.
const maxAuditFields = 19

// writeAudit writes the audit entry for d, unless the audit log is off or
// keeps refusals only and d is an admission.
func (rec *Recorder) writeAudit(r *http.Request, d Decision) {
	l := rec.audit
	if l == nil || rec.denialsOnly && d.Outcome == "admitted" {
		return
	}
	c := l.Check(zapcore.InfoLevel, AuditMessage)
	if c == nil {
		return
	}
	fp := auditFields.Get().(*[]zap.Field)
	fields := append((*fp)[:0],
		zap.String("outcome", d.Outcome),
		zap.String("reason", d.Reason),
	)
	if d.Status != 0 {
		fields = append(fields, zap.Int("status", d.Status))
	}
	if d.Handshake != "" {
		// A Level 3 handshake or verify call: no nonce, challenge, proof
		// or credential is logged, only who (once verified) and the result.
		fields = append(fields, zap.String("handshake", d.Handshake), zap.String("call", d.Call))
	}
	if del := d.Delegation; del != nil {
		fields = append(fields,
			zap.String("agent_did", del.AgentDID),
			zap.String("user_did", del.UserDID),
			zap.String("delegation_id", del.DelegationID),
			zap.String("issuer", del.Issuer),
			// A pointer in an interface is not copied to the heap, as
			// zap.Strings' slice would be.
			zap.Array("scopes", (*scopeList)(&del.Scopes)),
		)
	}
	if d.Carrier != "" {
		fields = append(fields, zap.String("carrier", d.Carrier))
	}
	if d.Tool != "" {
		tool := d.Tool
		if len(tool) > MaxAuditTool {
			tool = tool[:MaxAuditTool]
		}
		fields = append(fields, zap.String("tool", tool))
	}
	if r != nil {
		if rec.req.Upstream != nil {
			fields = append(fields, zap.String("upstream", rec.req.Upstream(r)))
		}
		fields = rec.appendRequestFields(fields, r)
	}
	c.Write(fields...)
	// The pooled slice must not keep the request's strings alive.
	clear(fields)
	*fp = fields[:0]
	auditFields.Put(fp)
}

// scopeList logs scopes as a JSON array, as zap.Strings does.
type scopeList []string

func (s *scopeList) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, v := range *s {
		enc.AppendString(v)
	}
	return nil
}

// appendRequestFields appends the fields that describe the request of an
// audit entry: method, host and path as the client sent them (before any
// handle_path stripping; the query is left out, as it may hold someone
// else's secrets), Caddy's request id and the peer's address.
func (rec *Recorder) appendRequestFields(fields []zap.Field, r *http.Request) []zap.Field {
	method, path := r.Method, ""
	if r.URL != nil {
		path = r.URL.Path
	}
	if rec.req.Original != nil {
		if m, u := rec.req.Original(r); u != nil {
			method, path = m, u.Path
		}
	}
	fields = append(fields,
		zap.String("method", method),
		zap.String("host", r.Host),
		zap.String("path", path),
	)
	// {http.request.uuid} is generated on first use and kept for the
	// request; using it also adds it to the access log entry as "uuid",
	// which is how an audit entry and an access log entry are matched.
	if rec.req.RequestID != nil {
		if id := rec.req.RequestID(r); id != "" {
			fields = append(fields, zap.String("request_id", id))
		}
	}
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	fields = append(fields, zap.String("remote_ip", ip))
	if rec.req.ClientIP != nil {
		if clientIP := rec.req.ClientIP(r); clientIP != "" && clientIP != ip {
			fields = append(fields, zap.String("client_ip", clientIP))
		}
	}
	return fields
}
