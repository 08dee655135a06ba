package integration

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// sessionUpstream is an MCP-I-aware upstream that opens its own session at
// verify: a random session id, with an expiresAt. It runs the
// challenge-response with a challenge.Service of its own, announced in its
// /.well-known/mcp-i.json, and serves two MCP endpoints:
//
//	/mcp            the demo MCP server, stateful (its own Mcp-Session-Id,
//	                from initialize)
//	/stateless/mcp  the demo MCP server without MCP sessions: an upstream
//	                whose handshake session is the agent's session, sent
//	                as Mcp-Session-Id
type sessionUpstream struct {
	svc       *challenge.Service
	mcp       http.Handler
	stateless http.Handler

	mu       sync.Mutex
	sessions []string
}

func newSessionUpstream(t *testing.T, audiences ...string) *sessionUpstream {
	opts := mcpserver.Options{CountInterval: countInterval}
	return &sessionUpstream{
		svc: newUpstreamChallengeService(t, audiences...),
		mcp: mcpserver.Handler(opts),
		stateless: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpserver.New(opts) },
			&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}),
	}
}

func (u *sessionUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/mcp-i.json":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(upstreamMCPIDocument))
	case "/rpc/handshake", "/rpc/verify":
		serveUpstreamHandshake(w, r, u.svc, func(_ []byte, _ error, res *challenge.VerifyResult) {
			if res == nil {
				return
			}
			id := make([]byte, 24)
			_, _ = rand.Read(id)
			res.SessionID = "up-" + base64.RawURLEncoding.EncodeToString(id)
			res.ExpiresAt = time.Now().Add(time.Hour).UTC().Truncate(time.Second)
			u.mu.Lock()
			u.sessions = append(u.sessions, res.SessionID)
			u.mu.Unlock()
		})
	case "/stateless/mcp":
		u.stateless.ServeHTTP(w, r)
	default:
		u.mcp.ServeHTTP(w, r)
	}
}

// opened returns the session ids the upstream opened.
func (u *sessionUpstream) opened() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.sessions...)
}

// whoamiCall is a raw tools/call of whoami.
func whoamiCall(id int) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": "whoami", "arguments": map[string]any{}}}
}

// identityIn returns the whoami result's structured content.
func identityIn(t *testing.T, resp rpcResponse, id int) map[string]any {
	t.Helper()
	res := resp.result(t, id)
	sc, _ := res["structuredContent"].(map[string]any)
	if sc == nil {
		t.Fatalf("whoami result without structured content: %v", res)
	}
	return sc
}

// TestLevel3ProxySessions: handshake proxy in front of an upstream that
// opens its own session at verify. After handshake and verify through the
// edge, the agent uses the MCP server presenting only the upstream's
// session id, which reaches the upstream unchanged with the Level 2
// identity. Two Caddy instances share a Redis: the session bound at one is
// good at the other.
func TestLevel3ProxySessions(t *testing.T) {
	redis := redistest.Start(t)
	storage := sharedStorage(t)
	var upstream atomic.Pointer[sessionUpstream]
	lazy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { upstream.Load().ServeHTTP(w, r) })
	extra := "level 3\nhandshake proxy\nsession_ttl 10m\nnonce_store redis " + redis.URL()
	a := startL3Edge(t, extra, lazy, storage)
	b := startL3Edge(t, extra, lazy, storage)
	up := newSessionUpstream(t, a.hostAudience(), b.hostAudience())
	upstream.Store(up)
	w := newWorld(t, a)
	cred := w.jwt(t, func(tm *vc.Template) { tm.Audience = []string{a.hostAudience(), b.hostAudience()} })
	ctx := testContext(t)

	hr := agentHandshake(ctx, t, a, w.agent, 1)
	sc := signAnswer(t, w.agent.key, w.agent.did, hr)
	res := agentVerify(ctx, a, nil, sc, cred, 2).result(t, 2)
	session, _ := res["sessionId"].(string)
	if opened := up.opened(); len(opened) != 1 || session != opened[0] || res["verified"] != true {
		t.Fatalf("verify result %v: the upstream's session (%v) should come back unchanged", res, opened)
	}
	a.upstream.Reset()

	// The upstream's session as Mcp-Session-Id, alone.
	resp := a.post(ctx, "/stateless/mcp", nil, session, whoamiCall(3))
	if id := identityIn(t, resp, 3); id["agent_did"] != w.agent.did || id["user_did"] != w.user.did || id["verified_delegation"] != true {
		t.Errorf("whoami with Mcp-Session-Id = %v: the bound identity should reach the upstream", id)
	}
	// As X-Mcpi-Handshake-Session, with a real MCP client, whose own
	// Mcp-Session-Id comes from the stateful server.
	cs := a.mustConnect(ctx, "/mcp", http.Header{"X-Mcpi-Handshake-Session": {session}}, legacyProtocol, nil)
	greet(ctx, t, cs)
	who, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil || who.IsError {
		t.Fatalf("whoami: %v %+v", err, who)
	}
	if id, _ := who.StructuredContent.(map[string]any); id["agent_did"] != w.agent.did || id["verified_delegation"] != true {
		t.Errorf("whoami with X-Mcpi-Handshake-Session = %v", who.StructuredContent)
	}
	mcpSession := cs.ID()
	// Closing the MCP session sends DELETE: passed through on the binding.
	_ = cs.Close()

	reqs := a.upstream.Requests()
	sawDelete := false
	for i, r := range reqs {
		switch {
		case r.Path == "/stateless/mcp":
			if got := r.Header.Get("Mcp-Session-Id"); got != session {
				t.Errorf("upstream request %d: Mcp-Session-Id %q, want the upstream's session intact", i, got)
			}
		case r.Path == "/mcp":
			if got := r.Header.Get("X-Mcpi-Handshake-Session"); got != session {
				t.Errorf("upstream request %d: X-Mcpi-Handshake-Session %q, want it intact", i, got)
			}
			if r.Method != http.MethodPost || !strings.Contains(string(r.Body), `"initialize"`) {
				if got := r.Header.Get("Mcp-Session-Id"); got != mcpSession {
					t.Errorf("upstream request %d (%s): Mcp-Session-Id %q, want the MCP server's own %q", i, r.Method, got, mcpSession)
				}
			}
			sawDelete = sawDelete || r.Method == http.MethodDelete
		}
		if r.Header.Get("X-Agent-Did") != w.agent.did {
			t.Errorf("upstream request %d (%s %s): X-Agent-DID %q", i, r.Method, r.Path, r.Header.Get("X-Agent-Did"))
		}
	}
	if !sawDelete {
		t.Error("the MCP client's DELETE did not reach the upstream")
	}
	assertNotForwarded(t, reqs, cred, sc.ProofValue)

	// B shares the Redis: the session bound at A is good there.
	resp = b.post(ctx, "/stateless/mcp", nil, session, whoamiCall(4))
	if id := identityIn(t, resp, 4); id["agent_did"] != w.agent.did {
		t.Errorf("whoami at B = %v", id)
	}
	greet(ctx, t, b.mustConnect(ctx, "/mcp", http.Header{"X-Mcpi-Handshake-Session": {session}}, legacyProtocol, nil))

	// An id the upstream never opened, or a forged one: as no session.
	forged := session[:len(session)-2] + "xy"
	for _, sid := range []string{"up-never-opened-session-id", forged} {
		body := b.assertEdgeError(t, b.post(ctx, "/stateless/mcp", nil, sid, whoamiCall(5)), http.StatusUnauthorized, "invalid_token")
		if body.Reason != "" {
			t.Errorf("unknown session: reason %q, want none (no credential)", body.Reason)
		}
	}

	// With Redis down a session cannot be checked: refused (503), never
	// let through. Back (empty, no persistence), the session is gone.
	redis.Stop()
	if resp := a.post(ctx, "/stateless/mcp", nil, session, whoamiCall(6)); resp.Status != http.StatusServiceUnavailable {
		t.Errorf("Redis down: HTTP %d %s", resp.Status, resp.Body)
	}
	redis.Restart()
	l3Eventually(t, 10*time.Second, "Redis back", func() bool {
		return a.post(ctx, "/stateless/mcp", nil, session, whoamiCall(7)).Status == http.StatusUnauthorized
	})
}
