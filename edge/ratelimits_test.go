package edge

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe/observetest"
	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// codeRateLimited is the JSON-RPC error of a request over a rate limit.
const codeRateLimited = -32029

// rlError is a rate limit's JSON-RPC error as an agent reads it.
type rlError struct {
	ID    json.RawMessage `json:"id"`
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Reason     string `json:"reason"`
			RetryAfter *int   `json:"retryAfter"`
			Limit      string `json:"limit"`
		} `json:"data"`
	} `json:"error"`
}

func perMinute(n int, key ...string) ratelimit.Limit {
	return ratelimit.Limit{Key: key, Rate: n, Per: time.Minute}
}

// An agent over its limit gets 429 with Retry-After and a JSON-RPC error
// saying rate_limited and when to retry; the call never reaches the
// upstream, is audited as rejected, and counts in the metrics by key kind.
// Another agent of the same user has its own counter.
func TestRateLimitPerAgent(t *testing.T) {
	f := newFixture(t)
	reg, gather := obsContext(t)
	h, logs := obsHandler(t, reg, f, func(c *setup) { c.RateLimits = []ratelimit.Limit{perMinute(2, "agent")} })
	tok := f.jwt(t, nil)
	for i := range 2 {
		if res := polServe(t, h, polPost(polCall(i, "echo"), tok), nil); !res.called {
			t.Fatalf("call %d within the limit not forwarded: %d %s", i, res.rec.Code, res.rec.Body)
		}
	}
	// Any method counts against a limit keyed by agent alone.
	res := polServe(t, h, polPost(`{"jsonrpc":"2.0","id":"x","method":"tools/list"}`, tok), nil)
	if res.called || res.rec.Code != http.StatusTooManyRequests {
		t.Fatalf("third request: called %v, status %d, want 429 and not forwarded", res.called, res.rec.Code)
	}
	ra, err := strconv.Atoi(res.rec.Header().Get("Retry-After"))
	if err != nil || ra < 29 || ra > 30 {
		t.Errorf("Retry-After %q, want 30 (seconds)", res.rec.Header().Get("Retry-After"))
	}
	var e rlError
	if err := json.Unmarshal(res.rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("body %s: %v", res.rec.Body, err)
	}
	if string(e.ID) != `"x"` || e.Error.Code != codeRateLimited || e.Error.Data.Reason != "rate_limited" ||
		e.Error.Data.RetryAfter == nil || *e.Error.Data.RetryAfter != ra || e.Error.Data.Limit != "agent" {
		t.Errorf("JSON-RPC error %s", res.rec.Body)
	}
	if strings.Contains(res.rec.Body.String(), f.agent.did) {
		t.Error("the refusal repeats the agent's DID")
	}
	other := fixture{user: f.user, agent: newParty(t)}
	if res := polServe(t, h, polPost(polCall(9, "echo"), other.jwt(t, nil)), nil); !res.called {
		t.Fatalf("another agent refused: %d %s", res.rec.Code, res.rec.Body)
	}

	var found bool
	for _, entry := range auditLogs(t, h, logs).All() {
		m := entry.ContextMap()
		if m["outcome"] == "rejected" && m["reason"] == "rate_limited" {
			found = true
		}
	}
	if !found {
		t.Error("no audit entry rejected/rate_limited")
	}
	all := observetest.Gather(t, gather)
	if got := observetest.Value(all, "caddy_mcpi_rate_limit_decisions_total", "key", "agent", "result", "limited"); got != 1 {
		t.Errorf("limited decisions %v, want 1", got)
	}
	if got := observetest.Value(all, "caddy_mcpi_rate_limit_decisions_total", "key", "agent", "result", "allowed"); got != 3 {
		t.Errorf("allowed decisions %v, want 3", got)
	}
	if got := observetest.Value(all, "caddy_mcpi_decisions_total", "outcome", "rejected", "reason", "rate_limited"); got != 1 {
		t.Errorf("rejected/rate_limited decisions %v, want 1", got)
	}
}

// Per agent and tool: each tool has its own counter; a call the tool
// policy denies costs nothing; in a batch every call counts, and a batch
// over the limit is answered whole, one error per request, nothing
// forwarded.
func TestRateLimitPerToolAfterPolicy(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, func(c *setup) { c.RateLimits = []ratelimit.Limit{perMinute(2, "agent", "tool")} })
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute", "files:read"} })
	// Denied by the policy (no files:write), three times: not counted.
	for i := range 3 {
		if res := polServe(t, h, polPost(polCall(i, "files_write"), tok), nil); res.called || res.rec.Code == http.StatusTooManyRequests {
			t.Fatalf("denied call: called %v status %d", res.called, res.rec.Code)
		}
	}
	batch := "[" + polCall(1, "echo") + "," + polCall(2, "echo") + "," + polCall(3, "files_read") + "]"
	if res := polServe(t, h, polPost(batch, tok), nil); !res.called {
		t.Fatalf("batch within the limits: %d %s", res.rec.Code, res.rec.Body)
	}
	batch = "[" + polCall(4, "files_read") + `,{"jsonrpc":"2.0","method":"notifications/x"},` + polCall(5, "echo") + "]"
	res := polServe(t, h, polPost(batch, tok), nil)
	if res.called || res.rec.Code != http.StatusTooManyRequests {
		t.Fatalf("batch over echo's limit: called %v status %d", res.called, res.rec.Code)
	}
	var errs []rlError
	if err := json.Unmarshal(res.rec.Body.Bytes(), &errs); err != nil || len(errs) != 2 {
		t.Fatalf("batch answer %s: %v, want an array of 2 errors", res.rec.Body, err)
	}
	for _, e := range errs {
		if e.Error.Data.Reason != "rate_limited" || e.Error.Data.Limit != "agent+tool" {
			t.Errorf("batch error %+v", e)
		}
	}
	// The refused batch took nothing from files_read: one call left.
	if res := polServe(t, h, polPost(polCall(6, "files_read"), tok), nil); !res.called {
		t.Fatalf("files_read after the refused batch: %d %s", res.rec.Code, res.rec.Body)
	}
}

// A batch counting more than a limit's burst never passes: 429 without
// Retry-After, saying to send fewer.
func TestRateLimitBatchOverBurst(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) { c.RateLimits = []ratelimit.Limit{perMinute(2, "user")} })
	batch := "[" + polCall(1, "a") + "," + polCall(2, "b") + "," + polCall(3, "c") + "]"
	res := polServe(t, h, polPost(batch, f.jwt(t, nil)), nil)
	if res.called || res.rec.Code != http.StatusTooManyRequests || res.rec.Header().Get("Retry-After") != "" {
		t.Fatalf("called %v status %d Retry-After %q", res.called, res.rec.Code, res.rec.Header().Get("Retry-After"))
	}
	if !strings.Contains(res.rec.Body.String(), "at most 2 per batch") {
		t.Errorf("answer %s does not say how many to send", res.rec.Body)
	}
}

// Without rate limits nothing changes: the limiter is not even built.
func TestRateLimitOffByDefault(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	if h.limiter != nil {
		t.Fatal("limits built without rate_limits")
	}
}
