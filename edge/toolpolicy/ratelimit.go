package toolpolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Rate limits and quotas on admitted MCP calls (edge/ratelimit holds the
// counting; the edge builds the limiter over its store). They are checked
// here, after the per-tool policy allowed a request, so
// that a call the policy denies costs the caller nothing; every JSON-RPC
// request of a message or batch counts (notifications and responses do
// not). A limit keyed by tool counts tools/call alone; one keyed by agent
// and/or user counts every method.

// codeRateLimited is the JSON-RPC error (implementation-defined server
// error range) of a request refused by a rate limit.
const codeRateLimited = -32029

// rateLimitWarnEvery spaces the warnings of a limits' store outage.
const rateLimitWarnEvery = 10 * time.Second

// rateLimits is the runtime state of the limits.
type rateLimits struct {
	limiter *ratelimit.Limiter
	// lastWarn is when a store failure was last logged (UnixNano).
	lastWarn atomic.Int64
}

// limitRate counts msgs, the messages of a request the per-tool policy
// allowed, against the rate limits; over one of them (or when their store
// fails and the limits fail closed), the request is refused: the refusal
// carries its decision.
func (p *Policy) limitRate(r *http.Request, d *vc.Delegation, msgs []mcp.Message, batch bool, adm observe.Decision) error {
	if rateTakenAtProof(r) {
		return nil
	}
	_, err := p.limitRateTaken(r, d, msgs, batch, adm)
	return err
}

// limitRateTaken is limitRate, and what an allowed request counted.
func (p *Policy) limitRateTaken(r *http.Request, d *vc.Delegation, msgs []mcp.Message, batch bool, adm observe.Decision) (ratelimit.Taken, error) {
	if p.limits == nil {
		return ratelimit.Taken{}, nil
	}
	calls := make([]ratelimit.Call, 0, len(msgs))
	for _, m := range msgs {
		if !mcp.IsRequest(m) {
			continue
		}
		var c ratelimit.Call
		if m.Method == mcp.MethodToolsCall {
			c.Tool, _ = mcp.ToolCallName(m)
			c.ToolCall = true
		}
		calls = append(calls, c)
	}
	var caller ratelimit.Caller
	if d != nil {
		caller = ratelimit.Caller{Agent: limitedAgent(d), User: d.UserDID}
	}
	v, counted := p.limits.limiter.CheckTaken(r.Context(), caller, calls)
	if !v.Limited && v.Err == nil {
		return counted, nil
	}
	dec := observe.Decision{Outcome: "rejected", Reason: "rate_limited", Status: http.StatusTooManyRequests,
		Delegation: d, Carrier: adm.Carrier, Tool: toolCallNames(msgs)}
	var retry int64
	var message string
	switch {
	case errors.Is(v.Err, ratelimit.ErrOutOfMemory) || errors.Is(v.Err, ratelimit.ErrFull):
		dec.Reason, dec.Status, retry = "rate_limit_store_full", http.StatusServiceUnavailable, 1
		message = "the rate limits could not be counted (their store is full); retry shortly"
		p.warnRateLimitStore(v.Err)
	case v.Err != nil:
		dec.Reason, dec.Status, retry = "rate_limit_unavailable", http.StatusServiceUnavailable, 1
		message = "the rate limits could not be checked (their store is unavailable); retry shortly"
		p.warnRateLimitStore(v.Err)
	case v.TooManyTools:
		message = fmt.Sprintf("rate limited: this batch calls %d distinct tools under the per-tool limit %s, at most %d are counted in one request; send fewer tools per batch",
			v.Calls, v.Limit.Kind(), ratelimit.MaxToolsPerRequest)
	case v.ToolCounters:
		retry = int64(math.Ceil(v.RetryAfter.Seconds()))
		message = fmt.Sprintf("rate limited: this caller has called %d distinct tools under the per-tool limit %s lately, the most counted for one caller; retry after %ds",
			ratelimit.MaxToolsPerCaller, v.Limit, retry)
	case v.RetryAfter == 0:
		message = fmt.Sprintf("rate limited: this request counts %d calls against the limit %s, more than it ever allows at once; send at most %d per batch",
			v.Calls, v.Limit, burstOf(v.Limit))
	default:
		retry = int64(math.Ceil(v.RetryAfter.Seconds()))
		message = fmt.Sprintf("rate limited by the limit %s: retry after %ds", v.Limit, retry)
	}
	rf := &refusal.Refusal{Status: dec.Status, Reason: dec.Reason, Decision: &dec, Log: "request refused by a rate limit",
		Err: fmt.Errorf("limit %s", v.Limit)}
	if retry > 0 {
		rf.Header = http.Header{"Retry-After": {strconv.FormatInt(retry, 10)}}
	}
	data := rateLimitData{Reason: dec.Reason, Limit: v.Limit.Kind()}
	if retry > 0 {
		data.RetryAfter = &retry
	}
	code := codeRateLimited
	if v.Err != nil {
		code = codeBatchRefused // the server error the edge gives whatever it could not check
	}
	rf.Body = rateLimitBody(msgs, batch, code, message, data)
	return ratelimit.Taken{}, rf
}

// limitedAgent is the agent limits keyed by agent count: the chain's
// first agent, whom the trusted issuer delegated to. The leaf's subject
// would let an agent multiply its counters by delegating onwards to DIDs
// it invents; the root's subject it cannot change. Agents below one root
// share its counters, as they share its authority.
func limitedAgent(d *vc.Delegation) string {
	if d.RootAgentDID != "" {
		return d.RootAgentDID
	}
	return d.AgentDID
}

// rateLimitData is the data member of a rate limit's JSON-RPC error: what
// an agent reads to back off.
type rateLimitData struct {
	Reason string `json:"reason"`
	// RetryAfter is in seconds, as the Retry-After header; absent when
	// waiting would not help.
	RetryAfter *int64 `json:"retryAfter,omitempty"`
	// Limit names the limit's key: agent, user, tool or a combination.
	Limit string `json:"limit"`
}

// rateLimitBody answers every request of msgs with the error: one object
// for a single message, an array for a batch.
func rateLimitBody(msgs []mcp.Message, batch bool, code int, message string, data rateLimitData) []byte {
	var out []json.RawMessage
	for _, m := range msgs {
		if mcp.IsRequest(m) {
			out = append(out, mcp.ErrorResponseData(m.ID, code, message, data))
		}
	}
	if !batch && len(out) == 1 {
		return out[0]
	}
	b, _ := json.Marshal(out)
	return b
}

func burstOf(l ratelimit.Limit) int {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Rate
}

// warnRateLimitStore logs a failure of the limits' store, at most once per
// rateLimitWarnEvery: during an outage every request would log it.
func (p *Policy) warnRateLimitStore(err error) {
	now := time.Now().UnixNano()
	last := p.limits.lastWarn.Load()
	if now-last < int64(rateLimitWarnEvery) || !p.limits.lastWarn.CompareAndSwap(last, now) {
		return
	}
	msg := "rate limits: store unavailable, requests under a limit are refused (503)"
	switch {
	case errors.Is(err, ratelimit.ErrFull):
		msg = "rate limits: the in-memory store is full of live counters, new callers are refused (503)"
	case errors.Is(err, ratelimit.ErrOutOfMemory):
		msg = "rate limits: Redis is out of memory (maxmemory reached under noeviction), requests under a limit are refused (503); raise Redis's maxmemory"
	}
	p.parts.Logger.Warn(msg, zap.Error(err))
}

// ReadsBody: a step after admission decides on every JSON-RPC body, and
// so reads it strictly and refuses what it cannot read (the per-tool
// policy, the rate limits).
func (p *Policy) ReadsBody() bool { return p.pol != nil || p.limits != nil }
