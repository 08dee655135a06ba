package observe

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the edge, registered in Caddy's registry for the current config
// (ctx.GetMetricsRegistry(): what the admin /metrics endpoint and the
// `metrics` handler serve). Every label value is bounded: outcomes and
// reasons come from fixed sets, the free-form labels of the other parts
// (handshake mode, cache, store, DID method, tool, …) are checked for shape
// and capped in number; anything else is counted as "other". No label ever
// holds a DID, a token or anything else a client chose freely.
//
//	caddy_mcpi_decisions_total{outcome,reason}
//	caddy_mcpi_verification_duration_seconds{result}          ok|error
//	caddy_mcpi_cache_requests_total{cache,result}             hit|miss
//	caddy_mcpi_did_resolution_errors_total{method,reason}
//	caddy_mcpi_status_list_errors_total{reason}
//	caddy_mcpi_nonce_store_duration_seconds{store,op,result}  ok|error|request_ended
//	caddy_mcpi_handshakes_total{mode,result}
//	caddy_mcpi_tool_decisions_total{tool,outcome}
//	caddy_mcpi_audit_entries_dropped_total
//	caddy_mcpi_authserver_events_total{event}

const (
	metricsNamespace = "caddy"
	metricsSubsystem = "mcpi"

	// labelOther replaces a label value outside its bounded set.
	labelOther = "other"

	// maxLabelValues caps the distinct values of one free-form label per
	// handler; maxToolValues does the same for tool names, of which a
	// policy may list more.
	maxLabelValues = 32
	maxToolValues  = 128
)

// Buckets. Verification is sub-millisecond for did:key and up to the
// did:web timeout when a document must be fetched; a nonce store is a map
// lookup or one Redis round trip.
var (
	verificationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	nonceStoreBuckets   = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
)

// decisionOutcomes and decisionReasons are the label values of
// caddy_mcpi_decisions_total. The reasons are vc.Reason's fixed set plus
// the handler's own tags (respond.go rejectionFor); a part that records
// decisions with a new reason adds it here, or it is counted as "other".
var (
	decisionOutcomes = labelSet("admitted", "rejected", "denied")
	decisionReasons  = labelSet(
		// Admissions.
		"ok", "anonymous",
		// vc.Reason.
		"too_large", "malformed", "unsupported_format", "unsupported_alg",
		"issuer_unresolved", "unknown_key", "key_not_authorized", "bad_signature",
		"wrong_type", "expired", "no_expiry", "lifetime_too_long", "not_yet_valid", "wrong_audience", "untrusted_issuer",
		"chain_incomplete", "chain_fetch_failed", "bad_chain", "status_unavailable", "bad_status_list",
		"revoked", "missing_scope", "presentation_required", "bad_presentation",
		"wrong_holder", "replayed", "invalid",
		// The handler's own rejections (respond.go).
		"no_credential", "conflicting_credentials", "body_too_large",
		"body_unreadable", "not_a_delegation", "edge_identity",
		"chain_too_large", "bad_chain_header", "nonce_store_unavailable",
		"unsupported_media_type",
		// DPoP-bound credentials (edge/boundcredential.go).
		"dpop_missing", "dpop_invalid", "dpop_replayed", "dpop_not_bound",
		// MCP framing (edge/framing).
		"header_mismatch", "bad_request_state",
		// Per-tool policy denials (edge/toolpolicy).
		"insufficient_scope", "no_matching_rule", "handshake_tool", "tool_not_allowed",
		// Rate limits (edge/ratelimits.go).
		"rate_limited", "rate_limit_unavailable",
		// KYA-OS declarations and request proofs (edge/proof: proof.Tag).
		"extension_not_declared", "malformed_declaration", "proof_ok", "proof_missing",
		"proof_malformed_proof", "proof_kid_did_mismatch", "proof_key_unresolvable",
		"proof_kid_not_in_did_document", "proof_did_keys_unresolvable", "proof_audience_mismatch",
		"proof_request_hash_mismatch", "proof_request_hash_ambiguous_number", "proof_invalid_window", "proof_ttl_too_long",
		"proof_created_in_future", "proof_expired", "proof_invalid_signature", "proof_alg_key_mismatch",
		"proof_cnf_key_mismatch", "proof_cnf_required_by_token", "proof_cnf_token_mismatch",
		"proof_nonce_replayed", "proof_nonce_seam_missing", "proof_nonce_store_unavailable",
		"proof_nonce_store_full", "proof_client_gone",
		"proof_verifier_threw", "proof_delegation_holder_mismatch",
	)
)

func labelSet(vals ...string) map[string]bool {
	m := make(map[string]bool, len(vals))
	for _, v := range vals {
		m[v] = true
	}
	return m
}

func fromSet(set map[string]bool, v string) string {
	if set[v] {
		return v
	}
	return labelOther
}

func okOrError(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// ErrRequestEnded, passed to NonceStore as its err, records the operation
// as result="request_ended": the caller hung up before the store answered.
// It is neither an ok answer nor a failure of the store, and keeping it
// out of "error" keeps a client that hangs up from raising the outage
// signal operators alert on.
var ErrRequestEnded = errors.New("observe: the request ended before the store answered")

// storeResult is the result label of a nonce store operation.
func storeResult(err error) string {
	if errors.Is(err, ErrRequestEnded) {
		return "request_ended"
	}
	return okOrError(err)
}

// metrics holds the collectors of one handler: shared with every other mcpi
// handler of the same config, since they are registered once per registry.
type metrics struct {
	decisions    *prometheus.CounterVec
	verification *prometheus.HistogramVec
	cache        *prometheus.CounterVec
	didErrors    *prometheus.CounterVec
	statusList   *prometheus.CounterVec
	nonceStore   *prometheus.HistogramVec
	handshakes   *prometheus.CounterVec
	tools        *prometheus.CounterVec
	auditDropped prometheus.Counter
	authEvents   *prometheus.CounterVec

	// Caps on the free-form labels, per label.
	mode, result, cacheName, store, op, method *cappedLabel
	didReason, statusReason                    *cappedLabel
	tool, toolOutcome                          *cappedLabel

	// The series every admitted request with a reused credential counts
	// into, looked up once (WithLabelValues hashes the labels and allocates
	// on every call). They are looked up on first use, not here, so that a
	// series appears in the output only once counted, as the others do.
	admittedOK, delegationHit hotCounter
	verifiedOK                hotObserver

	// toolSeries are the caddy_mcpi_tool_decisions_total series looked up
	// so far, by the tool and outcome passed in: every tools/call under a
	// policy counts into one. Bounded as the labels are: the tool is a
	// label already (toolLabel), the outcome one of a few.
	toolMu     sync.RWMutex
	toolSeries map[[2]string]prometheus.Counter
}

// maxToolSeries bounds toolSeries; past it, series are looked up per call.
const maxToolSeries = 1024

// hotCounter is one series of a CounterVec, looked up on first use.
type hotCounter struct {
	once sync.Once
	c    prometheus.Counter
}

func (h *hotCounter) get(lookup func() prometheus.Counter) prometheus.Counter {
	h.once.Do(func() { h.c = lookup() })
	return h.c
}

// hotObserver is one series of a HistogramVec, looked up on first use.
type hotObserver struct {
	once sync.Once
	o    prometheus.Observer
}

func (h *hotObserver) get(lookup func() prometheus.Observer) prometheus.Observer {
	h.once.Do(func() { h.o = lookup() })
	return h.o
}

// newMetrics creates the collectors and registers them in reg. A collector
// that is already registered (another mcpi handler of this config, or this
// one provisioned again) is reused from the AlreadyRegisteredError, so all
// handlers of a config count into the same series and a reload, which
// brings a fresh registry, starts clean. Any other registration error (the
// same name with other labels) is a bug, returned to fail Provision.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help,
		}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help, Buckets: buckets,
		}, labels)
	}
	m := &metrics{
		decisions: counter("decisions_total",
			"Admission decisions of the MCP-I edge, by outcome and reason.", "outcome", "reason"),
		verification: histogram("verification_duration_seconds",
			"Time to verify one presented delegation credential.", verificationBuckets, "result"),
		cache: counter("cache_requests_total",
			"Lookups in the edge's caches, by cache and hit or miss.", "cache", "result"),
		didErrors: counter("did_resolution_errors_total",
			"DID resolution failures, by DID method and reason.", "method", "reason"),
		statusList: counter("status_list_errors_total",
			"Status list fetch or check failures, by reason.", "reason"),
		nonceStore: histogram("nonce_store_duration_seconds",
			"Time of one nonce store operation, by store, operation and result.", nonceStoreBuckets, "store", "op", "result"),
		handshakes: counter("handshakes_total",
			"MCP-I handshakes, by mode and result.", "mode", "result"),
		tools: counter("tool_decisions_total",
			"Per-tool policy decisions, by tool and outcome.", "tool", "outcome"),
		auditDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "audit_entries_dropped_total",
			Help: "Audit log entries dropped because the log could not keep up (its queue was full).",
		}),

		mode:         newCappedLabel(isSnakeLabel, maxLabelValues),
		result:       newCappedLabel(isSnakeLabel, maxLabelValues),
		cacheName:    newCappedLabel(isSnakeLabel, maxLabelValues),
		store:        newCappedLabel(isSnakeLabel, maxLabelValues),
		op:           newCappedLabel(isSnakeLabel, maxLabelValues),
		method:       newCappedLabel(isSnakeLabel, maxLabelValues),
		didReason:    newCappedLabel(isSnakeLabel, maxLabelValues),
		statusReason: newCappedLabel(isSnakeLabel, maxLabelValues),
		tool:         newCappedLabel(isToolLabel, maxToolValues),
		toolOutcome:  newCappedLabel(isSnakeLabel, maxLabelValues),
	}
	var err error
	if m.decisions, err = register(reg, m.decisions); err != nil {
		return nil, err
	}
	if m.verification, err = register(reg, m.verification); err != nil {
		return nil, err
	}
	if m.cache, err = register(reg, m.cache); err != nil {
		return nil, err
	}
	if m.didErrors, err = register(reg, m.didErrors); err != nil {
		return nil, err
	}
	if m.statusList, err = register(reg, m.statusList); err != nil {
		return nil, err
	}
	if m.nonceStore, err = register(reg, m.nonceStore); err != nil {
		return nil, err
	}
	if m.handshakes, err = register(reg, m.handshakes); err != nil {
		return nil, err
	}
	if m.tools, err = register(reg, m.tools); err != nil {
		return nil, err
	}
	if m.auditDropped, err = register(reg, m.auditDropped); err != nil {
		return nil, err
	}
	m.authEvents = counter("authserver_events_total",
		"Events of the front door's authorization server: registration, consent_approved, consent_denied, issued, revoked, refresh_reused.", "event")
	if m.authEvents, err = register(reg, m.authEvents); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered in its
// place.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("mcpi: registering metrics: %v", err)
}

// cappedLabel bounds one free-form label: a value must have the right shape,
// and only the first max distinct values are kept; the rest become "other".
// The values come from code (a store name, a DID method), so the cap is a
// guard against a caller passing request data, not a limit in practice.
type cappedLabel struct {
	valid func(string) bool
	max   int

	mu   sync.RWMutex
	seen map[string]bool
}

func newCappedLabel(valid func(string) bool, max int) *cappedLabel {
	return &cappedLabel{valid: valid, max: max, seen: make(map[string]bool)}
}

func (c *cappedLabel) value(v string) string {
	if !c.valid(v) {
		return labelOther
	}
	c.mu.RLock()
	ok := c.seen[v]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[v] {
		return v
	}
	if len(c.seen) >= c.max {
		return labelOther
	}
	c.seen[v] = true
	return v
}

// isSnakeLabel: 1 to 32 of [a-z0-9_], starting with a letter. A DID (':'),
// a JWS ('.', upper case) or a URL never passes.
func isSnakeLabel(v string) bool {
	if v == "" || len(v) > 32 || v[0] < 'a' || v[0] > 'z' {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// isToolLabel: an MCP tool name, 1 to 64 of [A-Za-z0-9_.-/]. Tokens are
// longer than that.
func isToolLabel(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_', c == '-', c == '.', c == '/':
		default:
			return false
		}
	}
	return true
}

// didMethodLabel reduces what a caller passes as the DID method to the
// method name: "web", "did:web" and a whole "did:web:…" all give "web".
func didMethodLabel(m string) string {
	if rest, ok := strings.CutPrefix(m, "did:"); ok {
		m, _, _ = strings.Cut(rest, ":")
	}
	return m
}

// The methods below are for the other parts of the handler (handshake,
// caches, nonce stores, resolver, policy). They are safe on a handler
// without metrics (not provisioned, or provisioned without a registry) and
// safe for concurrent use.

// countHandshake counts one handshake (mode: how it was served, e.g.
// "terminate" or "proxy"; result: a snake_case tag, "issued", "verified"
// or a failure, see Handshake).
func (rec *Recorder) countHandshake(mode, result string) {
	m := rec.metricsOrNil()
	if m == nil {
		return
	}
	m.handshakes.WithLabelValues(m.mode.value(mode), m.result.value(result)).Inc()
}

// NonceStore records one nonce store operation (store: "memory",
// "redis"; op: "put", "consume", …) and its duration. err is a failure of
// the store itself; an unknown or spent nonce is a normal answer (nil);
// ErrRequestEnded is an operation its caller abandoned.
func (rec *Recorder) NonceStore(store, op string, d time.Duration, err error) {
	m := rec.metricsOrNil()
	if m == nil {
		return
	}
	m.nonceStore.WithLabelValues(m.store.value(store), m.op.value(op), storeResult(err)).Observe(d.Seconds())
}

// Cache counts one lookup in a cache (e.g. "delegation", "did").
func (rec *Recorder) Cache(cache string, hit bool) {
	m := rec.metricsOrNil()
	if m == nil {
		return
	}
	if hit && cache == "delegation" {
		// cacheName.value is stable once a name was seen (or the cap was
		// reached without it), so the first lookup holds for every later one.
		m.delegationHit.get(func() prometheus.Counter {
			return m.cache.WithLabelValues(m.cacheName.value(cache), "hit")
		}).Inc()
		return
	}
	result := "miss"
	if hit {
		result = "hit"
	}
	m.cache.WithLabelValues(m.cacheName.value(cache), result).Inc()
}

// DIDError counts one failed DID resolution. method is the DID method
// ("web", or the DID itself: only the method is kept); reason is a
// snake_case tag ("not_found", "fetch", "timeout", …).
func (rec *Recorder) DIDError(method, reason string) {
	m := rec.metricsOrNil()
	if m == nil {
		return
	}
	m.didErrors.WithLabelValues(m.method.value(didMethodLabel(method)), m.didReason.value(reason)).Inc()
}

// StatusListError counts one failed status list fetch or check.
func (rec *Recorder) StatusListError(reason string) {
	m := rec.metricsOrNil()
	if m == nil {
		return
	}
	m.statusList.WithLabelValues(m.statusReason.value(reason)).Inc()
}

// ToolDecision counts one per-tool policy decision (outcome: a
// snake_case tag such as "allowed" or "denied"). tool should be a
// tool named in the configured policy (or "other"): it is the MCP tool
// name, which the client chooses, so it is also shape-checked and capped.
// It is counted apart from caddy_mcpi_decisions_total: Decision does not
// count tools.
func (rec *Recorder) ToolDecision(tool, outcome string) {
	m := rec.metricsOrNil()
	if m == nil {
		return
	}
	key := [2]string{tool, outcome}
	m.toolMu.RLock()
	c := m.toolSeries[key]
	m.toolMu.RUnlock()
	if c == nil {
		// The capped labels are stable once a value was seen (or the cap
		// reached without it), so the series found now holds for later.
		c = m.tools.WithLabelValues(m.tool.value(tool), m.toolOutcome.value(outcome))
		m.toolMu.Lock()
		if m.toolSeries == nil {
			m.toolSeries = make(map[[2]string]prometheus.Counter)
		}
		if len(m.toolSeries) < maxToolSeries {
			m.toolSeries[key] = c
		}
		m.toolMu.Unlock()
	}
	c.Inc()
}

// metricsOrNil is nil for a nil Recorder or one without a registry.
func (rec *Recorder) metricsOrNil() *metrics {
	if rec == nil {
		return nil
	}
	return rec.metrics
}
