package edge

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/authzen"
	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
)

// testPDP is a small AuthZEN PDP on loopback: it allows a transfer of at
// most 100, denies a larger one with a reason, never answers for the
// tool "slow" and answers garbage for "garbled".
type testPDP struct {
	*httptest.Server
	calls atomic.Int32
	mu    sync.Mutex
	last  map[string]any
	body  []byte
}

func newTestPDP(t *testing.T) *testPDP {
	p := &testPDP{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		var req struct {
			Subject  authzen.Entity `json:"subject"`
			Resource authzen.Entity `json:"resource"`
			Context  struct {
				Arguments struct {
					Amount float64 `json:"amount"`
				} `json:"arguments"`
			} `json:"context"`
		}
		b, _ := io.ReadAll(r.Body)
		var all map[string]any
		_ = json.Unmarshal(b, &all)
		p.mu.Lock()
		p.last, p.body = all, b
		p.mu.Unlock()
		if err := json.Unmarshal(b, &req); err != nil || r.URL.Path != authzen.EvaluationPath {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case req.Resource.ID == "slow":
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		case req.Resource.ID == "garbled":
			_, _ = io.WriteString(w, `{"decision":"maybe"}`)
		case req.Context.Arguments.Amount > 100:
			_, _ = io.WriteString(w, `{"decision":false,"context":{"reason_user":{"en-403":"Transfers over 100 need a manager."}}}`)
		default:
			_, _ = io.WriteString(w, `{"decision":true}`)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *testPDP) lastBody() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.body
}

func (p *testPDP) lastRequest() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func TestAuthZENDecidesToolCalls(t *testing.T) {
	f := newFixture(t)
	pdp := newTestPDP(t)
	h, logs := obsHandler(t, nil, f, func(c *setup) {
		c.AuthZEN = &authzen.Config{URL: pdp.URL, AllowPrivate: true, Timeout: duration.Duration(300 * time.Millisecond)}
	})
	tok := f.jwt(t, nil)
	for _, tc := range []struct {
		name, body   string
		forwarded    bool
		reason, text string
	}{
		{name: "allowed", body: rulesCall(1, "transfer", `{"amount": 100, "to": "acct-9"}`), forwarded: true},
		{name: "denied with the PDP's reason", body: rulesCall(1, "transfer", `{"amount": 31337, "to": "acct-9"}`),
			reason: "rule_denied", text: "Transfers over 100 need a manager."},
		{name: "timeout fails closed", body: rulesCall(1, "slow", `{}`), reason: "policy_error", text: "policy decision point gave no decision"},
		{name: "malformed answer fails closed", body: rulesCall(1, "garbled", `{}`), reason: "policy_error", text: "policy decision point gave no decision"},
		{name: "arguments too deep never asked", body: rulesCall(1, "transfer", strings.Repeat(`{"a":`, 70)+"1"+strings.Repeat("}", 70)), reason: "policy_error", text: "gave no decision"},
		{name: "batch decided per message", body: "[" + rulesCall(1, "transfer", `{"amount": 1}`) + "," + rulesCall(2, "transfer", `{"amount": 1000}`) + "]",
			reason: "rule_denied", text: "Transfers over 100 need a manager."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res := polServe(t, h, polPost(tc.body, tok), nil)
			if time.Since(start) > 2*time.Second {
				t.Errorf("the call took %s: the PDP's timeout did not hold", time.Since(start))
			}
			if res.called != tc.forwarded {
				t.Fatalf("forwarded %t, want %t: HTTP %d %s", res.called, tc.forwarded, res.rec.Code, res.rec.Body)
			}
			if tc.forwarded {
				return
			}
			body := res.rec.Body.String()
			if res.rec.Code != http.StatusOK || !strings.Contains(body, tc.text) ||
				!strings.Contains(body, `"error":"`+tc.reason+`"`) || !strings.Contains(body, `"rule":"authzen"`) {
				t.Fatalf("HTTP %d %s; want the %s denial saying %q", res.rec.Code, body, tc.reason, tc.text)
			}
			entries := auditLogs(t, h, logs).All()
			e := entries[len(entries)-1].ContextMap()
			if e["outcome"] != "denied" || e["reason"] != tc.reason || e["rule"] != "authzen" {
				t.Errorf("audit entry %v, want denied %s naming authzen", e, tc.reason)
			}
		})
	}
	for _, le := range logs.All() {
		for _, v := range le.ContextMap() {
			if s, ok := v.(string); ok && (strings.Contains(s, "acct-9") || strings.Contains(s, "31337")) {
				t.Errorf("a log holds argument values: %q", s)
			}
		}
	}

	// What the PDP was sent: the agent as subject, the user and the
	// delegation as context, the tool as resource.
	polServe(t, h, polPost(rulesCall(1, "transfer", `{"amount": 7}`), tok), nil)
	req := pdp.lastRequest()
	sub, _ := req["subject"].(map[string]any)
	act, _ := req["action"].(map[string]any)
	res, _ := req["resource"].(map[string]any)
	ctx, _ := req["context"].(map[string]any)
	user, _ := ctx["user"].(map[string]any)
	deleg, _ := ctx["delegation"].(map[string]any)
	args, _ := ctx["arguments"].(map[string]any)
	if sub["type"] != "agent" || sub["id"] != f.agent.did || act["name"] != "tools/call" ||
		res["type"] != "mcp_tool" || res["id"] != "transfer" || user["id"] != f.user.did ||
		deleg["issuer"] != f.user.did || args["amount"] != float64(7) {
		t.Fatalf("the PDP got %v", req)
	}
}

func TestAuthZENCacheHolds(t *testing.T) {
	f := newFixture(t)
	pdp := newTestPDP(t)
	h, _ := obsHandler(t, nil, f, func(c *setup) {
		c.AuthZEN = &authzen.Config{URL: pdp.URL, AllowPrivate: true, CacheTTL: duration.Duration(time.Minute)}
	})
	tok := f.jwt(t, nil)
	for range 3 {
		if res := polServe(t, h, polPost(rulesCall(1, "transfer", `{"amount": 5}`), tok), nil); !res.called {
			t.Fatalf("HTTP %d %s", res.rec.Code, res.rec.Body)
		}
	}
	if n := pdp.calls.Load(); n != 1 {
		t.Fatalf("the PDP was asked %d times for the same call, want 1 (cached)", n)
	}
	polServe(t, h, polPost(rulesCall(1, "transfer", `{"amount": 6}`), tok), nil)
	if n := pdp.calls.Load(); n != 2 {
		t.Fatalf("other arguments: the PDP was asked %d times in all, want 2", n)
	}
}

func TestAuthZENConfigRefused(t *testing.T) {
	for _, pc := range []*authzen.Config{{URL: ""}, {URL: "http://pdp.example.com"}, {URL: "https://pdp.example.com", CacheTTL: -1}} {
		cfg := &Config{}
		cfg.AuthZEN = pc
		if err := cfg.PolicyConfig.Validate(); err == nil {
			t.Errorf("authzen %+v accepted", pc)
		}
	}
	cfg := &Config{}
	cfg.AuthZEN = &authzen.Config{URL: "https://pdp.example.com"}
	cfg.Rules = []RuleConfig{{Name: "authzen", Expression: "true"}}
	if err := cfg.PolicyConfig.Validate(); err == nil || !strings.Contains(err.Error(), "choose another") {
		t.Errorf("a rule named authzen beside the PDP: %v", err)
	}
}
