package observe

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/trace"
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
const maxAuditFields = 20

// auditEntry is what an audit entry says, taken from the request while it
// is still being served: the request may be gone when the entry is
// written (auditQueue). Only strings are kept, no request.
type auditEntry struct {
	// at is when the decision was made: the entry's timestamp, however
	// late it is written.
	at time.Time

	outcome, reason string
	status          int
	handshake, call string

	hasDelegation                           bool
	agentDID, userDID, delegationID, issuer string
	// scopes points at the delegation's: a zap core may keep the field
	// (zaptest's observer does) after the entry's own memory is cleared.
	scopes *[]string

	carrier, tool, rule string

	// The request's fields, when there was a request.
	hasRequest                              bool
	upstream, method, host, path, requestID string
	remoteIP, clientIP                      string
	// seq numbers an entry whose request has no host id (requestID ""):
	// its request_id is then the recorder's, made by the writer (auditID).
	seq uint64
	// traceID is the trace of the request's span, when it has one.
	traceID trace.TraceID
}

// size is about the bytes the entry keeps alive: what auditQueue's byte
// bound counts.
func (e *auditEntry) size() int {
	n := len(e.outcome) + len(e.reason) + len(e.handshake) + len(e.call) +
		len(e.agentDID) + len(e.userDID) + len(e.delegationID) + len(e.issuer) +
		len(e.carrier) + len(e.tool) + len(e.rule) + len(e.upstream) + len(e.method) + len(e.host) +
		len(e.path) + len(e.requestID) + len(e.remoteIP) + len(e.clientIP)
	if e.scopes != nil {
		for _, s := range *e.scopes {
			n += len(s) + 16
		}
	}
	return n + int(unsafe.Sizeof(*e))
}

// writeAudit records the audit entry for d, unless the audit log is off or
// keeps refusals only and d is an admission. The entry is taken from r
// here; it is written by the queue's writer, or here when there is none.
func (rec *Recorder) writeAudit(r *http.Request, d Decision) {
	if rec.audit == nil || rec.denialsOnly && d.Outcome == "admitted" {
		return
	}
	e := rec.newAuditEntry(r, d)
	if rec.queue == nil || !rec.queue.push(&e) {
		rec.writeAuditEntry(&e)
	}
}

// newAuditEntry takes what the entry for d says from d and r (nil: no
// request fields).
func (rec *Recorder) newAuditEntry(r *http.Request, d Decision) auditEntry {
	e := auditEntry{
		at:      time.Now(),
		outcome: d.Outcome, reason: d.Reason, status: d.Status,
		handshake: d.Handshake, call: d.Call,
		carrier: d.Carrier, tool: d.Tool, rule: d.Rule,
	}
	if len(e.tool) > MaxAuditTool {
		e.tool = e.tool[:MaxAuditTool]
	}
	if del := d.Delegation; del != nil {
		e.hasDelegation = true
		e.agentDID, e.userDID, e.delegationID, e.issuer = del.AgentDID, del.UserDID, del.DelegationID, del.Issuer
		e.scopes = &del.Scopes
	}
	if r != nil {
		e.hasRequest = true
		if rec.req.Upstream != nil {
			e.upstream = rec.req.Upstream(r)
		}
		rec.takeRequestFields(&e, r)
	}
	return e
}

// writeAuditEntry writes e to the audit log, stamped with the time of its
// decision.
func (rec *Recorder) writeAuditEntry(e *auditEntry) {
	c := rec.audit.Check(zapcore.InfoLevel, AuditMessage)
	if c == nil {
		return
	}
	c.Time = e.at
	fp := auditFields.Get().(*[]zap.Field)
	fields := append((*fp)[:0],
		zap.String("outcome", e.outcome),
		zap.String("reason", e.reason),
	)
	if e.status != 0 {
		fields = append(fields, zap.Int("status", e.status))
	}
	if e.handshake != "" {
		// A Level 3 handshake or verify call: no nonce, challenge, proof
		// or credential is logged, only who (once verified) and the result.
		fields = append(fields, zap.String("handshake", e.handshake), zap.String("call", e.call))
	}
	if e.hasDelegation {
		fields = append(fields,
			zap.String("agent_did", e.agentDID),
			zap.String("user_did", e.userDID),
			zap.String("delegation_id", e.delegationID),
			zap.String("issuer", e.issuer),
			// A pointer in an interface is not copied to the heap, as
			// zap.Strings' slice would be.
			zap.Array("scopes", (*scopeList)(e.scopes)),
		)
	}
	if e.carrier != "" {
		fields = append(fields, zap.String("carrier", e.carrier))
	}
	if e.tool != "" {
		fields = append(fields, zap.String("tool", e.tool))
	}
	if e.rule != "" {
		fields = append(fields, zap.String("rule", e.rule))
	}
	if e.hasRequest {
		if rec.req.Upstream != nil {
			fields = append(fields, zap.String("upstream", e.upstream))
		}
		fields = append(fields,
			zap.String("method", e.method),
			zap.String("host", e.host),
			zap.String("path", e.path),
		)
		if e.requestID != "" {
			fields = append(fields, zap.String("request_id", e.requestID))
		} else {
			fields = append(fields, zap.String("request_id", rec.auditID(e.seq)))
		}
		if e.traceID.IsValid() {
			fields = append(fields, zap.String("trace_id", hex.EncodeToString(e.traceID[:])))
		}
		fields = append(fields, zap.String("remote_ip", e.remoteIP))
		if e.clientIP != "" {
			fields = append(fields, zap.String("client_ip", e.clientIP))
		}
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

// takeRequestFields takes the fields that describe the request of an
// audit entry: method, host and path as the client sent them (before any
// handle_path stripping; the query is left out, as it may hold someone
// else's secrets), the host's request id and the peer's address.
func (rec *Recorder) takeRequestFields(e *auditEntry, r *http.Request) {
	e.method = r.Method
	if r.URL != nil {
		e.path = r.URL.Path
	}
	if rec.req.Original != nil {
		if m, u := rec.req.Original(r); u != nil {
			e.method, e.path = m, u.Path
		}
	}
	e.host = r.Host
	// The host's id of the request, when it already has one (Caddy: the
	// access log's uuid, once something used {http.request.uuid}), so
	// that the two logs join; otherwise a number, which the writer turns
	// into the recorder's own id. Taken here, while the request is served.
	if rec.req.RequestID != nil {
		e.requestID = rec.req.RequestID(r)
	}
	if e.requestID == "" {
		e.seq = rec.seq.Add(1)
	}
	// With tracing on, the entry joins the request's trace (and the
	// access log, which has the same trace id).
	e.traceID = trace.SpanContextFromContext(r.Context()).TraceID()
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	e.remoteIP = ip
	if rec.req.ClientIP != nil {
		if clientIP := rec.req.ClientIP(r); clientIP != ip {
			e.clientIP = clientIP
		}
	}
}

// auditID is the request_id of the entry numbered seq, whose request had
// no id of the host's: the recorder's random prefix and the number, which
// no other recorder (process, config) makes. It is made by the writer,
// off the request path.
func (rec *Recorder) auditID(seq uint64) string {
	var buf [len(auditIDPrefixSample) + 1 + 16]byte
	b := append(buf[:0], rec.idPrefix...)
	b = append(b, '-')
	b = strconv.AppendUint(b, seq, 16)
	return string(b)
}

// auditIDPrefixSample has the length of a recorder's id prefix: 16 hex
// digits, 64 random bits.
const auditIDPrefixSample = "0123456789abcdef"

// newAuditIDPrefix is a recorder's random id prefix.
func newAuditIDPrefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail (Go 1.24+)
	return hex.EncodeToString(b[:])
}
