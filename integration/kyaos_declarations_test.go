package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Under require_extension a 2025-11-25 client declares the extension once,
// in initialize, and the edge remembers it for the session the upstream
// opens. Only an authenticated caller's sessions are remembered, each
// user (whose agents are its callers) holding at most 256: anonymous
// initialize calls write nothing, and one user's many sessions push out
// only its own.

// declarationsConfig: an anonymous tool lets anonymous callers initialize;
// the memory store holds 300 entries a partition.
const declarationsConfig = `require_extension
tool whoami {
	allow_anonymous
}
tool transfer {
	scopes greet:execute
}`

// declaringUpstream is a stateful 2025-11-25 server: each initialize opens a
// session (Mcp-Session-Id s-N); every other request gets a result.
func declaringUpstream() http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage
			Method string
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &msg) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		result := `{"content":[{"type":"text","text":"done"}],"isError":false}`
		if msg.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s-%d", n.Add(1)))
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"up","version":"1"}}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+result+`}`)
	})
}

const declaredInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"t","version":"1"},"capabilities":{"extensions":{"org.kya-os/decentralized-authority":{}}}}}`

const undeclaredCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`

// post2025 posts body with the session id (none: "") and the credential
// (anonymous: "").
func post2025(ctx context.Context, t *testing.T, h *harness, cred, session, body string) rpcResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	if cred != "" {
		req.Header.Set("KYA-OS-Delegation-Credential", cred)
	}
	return h.do(req)
}

// openSession initializes, declared, and returns the session the upstream opened.
func openSession(ctx context.Context, t *testing.T, h *harness, cred string) string {
	t.Helper()
	resp := post2025(ctx, t, h, cred, "", declaredInitialize)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.Status != http.StatusOK || id == "" {
		t.Fatalf("initialize: HTTP %d %s (session %q)", resp.Status, resp.Body, id)
	}
	return id
}

// TestKYAOSDeclarationsAnonymousFloodMemory: 320 anonymous initialize calls
// against a memory store of 300 a partition leave a credentialed client's
// new session declared; an anonymous session must declare per request; a
// user whose agents open more than 256 sessions loses its oldest, and
// another user keeps room.
func TestKYAOSDeclarationsAnonymousFloodMemory(t *testing.T) {
	h := startL3Edge(t, declarationsConfig+"\nnonce_store memory 300", declaringUpstream(), sharedStorage(t))
	w := newWorld(t, h)
	ctx := testContext(t)

	var anon string
	for range 320 {
		anon = openSession(ctx, t, h, "")
	}
	cred := w.jwt(t)
	s := openSession(ctx, t, h, cred)
	if resp := post2025(ctx, t, h, cred, s, undeclaredCall); resp.rpcError(t, 2) != 0 {
		t.Fatalf("credentialed session after an anonymous flood: HTTP %d %s", resp.Status, resp.Body)
	}
	before := len(h.upstream.Requests())
	if resp := post2025(ctx, t, h, "", anon, undeclaredCall); resp.rpcError(t, 2) != -32021 {
		t.Fatalf("anonymous session, undeclared call: HTTP %d %s", resp.Status, resp.Body)
	}
	if len(h.upstream.Requests()) != before {
		t.Fatal("an undeclared anonymous call reached the upstream")
	}

	// The credentialed caller opens 299 more: it holds its newest 256.
	first := s
	for range 299 {
		s = openSession(ctx, t, h, cred)
	}
	if resp := post2025(ctx, t, h, cred, first, undeclaredCall); resp.rpcError(t, 2) != -32021 {
		t.Fatalf("the caller's oldest session is still declared: HTTP %d %s", resp.Status, resp.Body)
	}
	if resp := post2025(ctx, t, h, cred, s, undeclaredCall); resp.rpcError(t, 2) != 0 {
		t.Fatalf("the caller's newest session: HTTP %d %s", resp.Status, resp.Body)
	}
	// The same user's other agent counts against the same 256: its new
	// session pushes out the user's oldest, not another user's.
	second := s
	otherAgent := newParty(t, didresolver.Ed25519)
	credAgent := w.jwt(t, func(tm *vc.Template) { tm.AgentDID = otherAgent.did })
	sa := openSession(ctx, t, h, credAgent)
	if resp := post2025(ctx, t, h, credAgent, sa, undeclaredCall); resp.rpcError(t, 2) != 0 {
		t.Fatalf("the user's other agent's session: HTTP %d %s", resp.Status, resp.Body)
	}
	if resp := post2025(ctx, t, h, cred, second, undeclaredCall); resp.rpcError(t, 2) != 0 {
		t.Fatalf("the user's newest session: HTTP %d %s", resp.Status, resp.Body)
	}
	// Another user still has room (300 - 256).
	other := newParty(t, didresolver.Ed25519)
	cred2 := w.jwt(t, func(tm *vc.Template) { tm.UserDID = other.did })
	s2 := openSession(ctx, t, h, cred2)
	if resp := post2025(ctx, t, h, cred2, s2, undeclaredCall); resp.rpcError(t, 2) != 0 {
		t.Fatalf("another user's session: HTTP %d %s", resp.Status, resp.Body)
	}
}

// TestKYAOSDeclarationsAnonymousWriteNothingRedis: with a Redis store,
// anonymous initialize calls write no key; a credentialed one writes its
// session's declaration and its caller's index.
func TestKYAOSDeclarationsAnonymousWriteNothingRedis(t *testing.T) {
	srv := redistest.Start(t)
	h := startL3Edge(t, declarationsConfig+"\nnonce_store redis "+srv.URL(), declaringUpstream(), sharedStorage(t))
	w := newWorld(t, h)
	ctx := testContext(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	for range 200 {
		openSession(ctx, t, h, "")
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("anonymous initialize calls wrote %d keys (%v)", n, err)
	}
	cred := w.jwt(t)
	s := openSession(ctx, t, h, cred)
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 2 {
		t.Fatalf("a credentialed initialize wrote %d keys (%v), want the declaration and its caller's index", n, err)
	}
	if resp := post2025(ctx, t, h, cred, s, undeclaredCall); resp.rpcError(t, 2) != 0 {
		t.Fatalf("credentialed session: HTTP %d %s", resp.Status, resp.Body)
	}
}
