package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestLevel3Terminate: an agent with a did:key completes the JSON-RPC
// challenge-response at the edge (handshake terminate), then uses the MCP
// server through a real MCP client presenting only the edge session.
func TestLevel3Terminate(t *testing.T) {
	h := startL3Edge(t, "level 3\nhandshake terminate\nsession_ttl 10m", nil, sharedStorage(t))
	w := newWorld(t, h)
	cred := w.jwt(t)
	ctx := testContext(t)

	// Discovery: the edge's own endpoints.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/.well-known/mcp-i.json", nil)
	doc := h.do(req)
	var d struct {
		MCPI struct {
			Version   string            `json:"version"`
			Endpoints map[string]string `json:"endpoints"`
		} `json:"mcp_i"`
	}
	if err := json.Unmarshal(doc.Body, &d); doc.Status != http.StatusOK || err != nil ||
		d.MCPI.Version != "2.0.0" || d.MCPI.Endpoints["handshake"] != l3HandshakePath || d.MCPI.Endpoints["verify"] != l3VerifyPath {
		t.Fatalf("mcp-i.json: HTTP %d %s", doc.Status, doc.Body)
	}

	// The edge's did:web document (Level 2) lists the handshake service.
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/.well-known/did.json", nil)
	didDoc := h.do(req)
	var dd struct {
		ID      string `json:"id"`
		Service []struct {
			ID              string            `json:"id"`
			Type            string            `json:"type"`
			ServiceEndpoint map[string]string `json:"serviceEndpoint"`
		} `json:"service"`
	}
	if err := json.Unmarshal(didDoc.Body, &dd); didDoc.Status != http.StatusOK || err != nil || len(dd.Service) != 1 ||
		dd.Service[0].ID != dd.ID+"#mcp-i" || dd.Service[0].Type != "mcp-i" ||
		dd.Service[0].ServiceEndpoint["handshake"] != h.base+l3HandshakePath || dd.Service[0].ServiceEndpoint["verify"] != h.base+l3VerifyPath {
		t.Errorf("did.json: HTTP %d %s", didDoc.Status, didDoc.Body)
	}

	hr := agentHandshake(ctx, t, h, w.agent, 1)
	sc := signAnswer(t, w.agent.key, w.agent.did, hr)
	resp := agentVerify(ctx, h, nil, sc, cred, 2)
	res := resp.result(t, 2)
	session, _ := res["sessionId"].(string)
	if res["verified"] != true || res["agentDid"] != w.agent.did || res["userDid"] != w.user.did || session == "" {
		t.Fatalf("verify result %v", res)
	}
	exp, err := time.Parse(time.RFC3339, res["expiresAt"].(string))
	if err != nil || time.Until(exp) > 10*time.Minute || time.Until(exp) < 9*time.Minute {
		t.Errorf("expiresAt %v (session_ttl 10m)", res["expiresAt"])
	}
	if len(h.upstream.Requests()) != 0 {
		t.Errorf("the upstream saw the handshake: %v", rpcMethods(h.upstream.Requests()))
	}

	// The same answer again is a replay.
	if code := agentVerify(ctx, h, nil, sc, cred, 3).rpcError(t, 3); code != challenge.CodeReplay {
		t.Errorf("replayed answer: code %d, want %d", code, challenge.CodeReplay)
	}
	// Signed with another key: refused, and the challenge is still good.
	hr2 := agentHandshake(ctx, t, h, w.agent, 4)
	other := newParty(t, didresolver.Ed25519)
	if code := agentVerify(ctx, h, nil, signAnswer(t, other.key, w.agent.did, hr2), cred, 5).rpcError(t, 5); code != challenge.CodeBadProof {
		t.Errorf("forged proof: code %d, want %d", code, challenge.CodeBadProof)
	}

	// Only the session header from here on.
	cs := h.mustConnect(ctx, "/mcp", http.Header{"X-Mcpi-Handshake-Session": {session}}, legacyProtocol, nil)
	greet(ctx, t, cs)
	who, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil || who.IsError {
		t.Fatalf("whoami: %v %+v", err, who)
	}
	id, _ := who.StructuredContent.(map[string]any)
	if id["agent_did"] != w.agent.did || id["user_did"] != w.user.did || id["verified_delegation"] != true {
		t.Errorf("whoami = %v: the Level 2 identity of the session should reach the upstream", who.StructuredContent)
	}
	reqs := h.upstream.Requests()
	for _, m := range []string{"initialize", "tools/call"} {
		if !strings.Contains(strings.Join(rpcMethods(reqs), " "), m) {
			t.Errorf("upstream never saw %s", m)
		}
	}
	for i, r := range reqs {
		if got := r.Header.Get("X-Mcpi-Handshake-Session"); got != session {
			t.Errorf("upstream request %d: X-Mcpi-Handshake-Session %q, want it intact", i, got)
		}
		if r.Method == http.MethodPost && !strings.Contains(string(r.Body), `"initialize"`) && r.Header.Get("Mcp-Session-Id") == "" {
			t.Errorf("upstream request %d: the MCP server's Mcp-Session-Id did not come through", i)
		}
	}
	assertNotForwarded(t, reqs, cred, sc.ProofValue)

	// Without the session, the same call needs a credential.
	h.assertEdgeError(t, h.post(ctx, "/mcp", nil, "", map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
		http.StatusUnauthorized, "invalid_token")
	// A forged session is refused.
	forged := session[:len(session)-4] + "AAAA"
	if forged == session {
		forged = session[:len(session)-4] + "BBBB"
	}
	body := h.assertEdgeError(t, h.post(ctx, "/mcp", http.Header{"X-Mcpi-Handshake-Session": {forged}}, "",
		map[string]any{"jsonrpc": "2.0", "id": 10, "method": "tools/list"}), http.StatusUnauthorized, "invalid_token")
	if body.Reason != vc.Reason(vc.ErrSignature) {
		t.Errorf("forged session: reason %q", body.Reason)
	}
}

// TestLevel3Proxy: handshake proxy in front of an upstream that runs its own
// challenge-response (discovered from its /.well-known/mcp-i.json through
// reverse_proxy). The edge records the upstream's challenge, checks the
// answer before the upstream sees it, and forwards it with the Level 2
// headers.
func TestLevel3Proxy(t *testing.T) {
	// The upstream checks the credential's audience: the edge's.
	var upstream atomic.Pointer[handshakeUpstream]
	lazy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { upstream.Load().ServeHTTP(w, r) })
	h := startL3Edge(t, "level 3\nhandshake proxy", lazy, sharedStorage(t))
	up := newHandshakeUpstream(t, h.hostAudience())
	upstream.Store(up)
	w := newWorld(t, h)
	cred := w.jwt(t)
	ctx := testContext(t)

	hr := agentHandshake(ctx, t, h, w.agent, 1)
	paths := []string{}
	for _, r := range h.upstream.Requests() {
		paths = append(paths, r.Method+" "+r.Path)
	}
	if strings.Join(paths, ",") != "GET /.well-known/mcp-i.json,POST /rpc/handshake" {
		t.Errorf("upstream got %v", paths)
	}
	sc := signAnswer(t, w.agent.key, w.agent.did, hr)

	// A forged answer never reaches the upstream.
	other := newParty(t, didresolver.Ed25519)
	if code := agentVerify(ctx, h, nil, signAnswer(t, other.key, w.agent.did, hr), cred, 2).rpcError(t, 2); code != challenge.CodeBadProof {
		t.Errorf("forged proof: code %d", code)
	}
	if v, _ := up.verified(); len(v) != 0 {
		t.Fatalf("the upstream got %d verify calls for a forged answer", len(v))
	}

	resp := agentVerify(ctx, h, http.Header{"X-Agent-DID": {"did:key:forged"}}, sc, cred, 3)
	res := resp.result(t, 3)
	if res["sessionId"] != "upstream-session-1" || res["agentDid"] != w.agent.did {
		t.Fatalf("verify result is not the upstream's: %v", res)
	}
	got, results := up.verified()
	if len(got) != 1 || results[0] != nil {
		t.Fatalf("upstream verify calls %d, its own check: %v", len(got), results)
	}
	hdr := got[0].Header
	if v := hdr.Get("X-Agent-Did"); v != w.agent.did {
		t.Errorf("forwarded verify: X-Agent-DID %q, want %s (Level 2 headers on the forwarded verify)", v, w.agent.did)
	}
	if v := hdr.Get("X-User-Did"); v != w.user.did {
		t.Errorf("forwarded verify: X-User-DID %q, want %s", v, w.user.did)
	}
	if hdr.Get("X-Verified-Delegation") == "" {
		t.Error("forwarded verify: no X-Verified-Delegation")
	}

	// The replay stops at the edge (the upstream would refuse it too, but
	// never gets the chance).
	if code := agentVerify(ctx, h, nil, sc, cred, 4).rpcError(t, 4); code != challenge.CodeReplay {
		t.Errorf("replay: code %d, want %d", code, challenge.CodeReplay)
	}
	if v, _ := up.verified(); len(v) != 1 {
		t.Errorf("the upstream got the replay (%d verify calls)", len(v))
	}

	// MCP itself still needs the credential in proxy mode.
	cs := h.mustConnect(ctx, "/mcp", http.Header{"Authorization": {"Bearer " + cred}}, legacyProtocol, nil)
	greet(ctx, t, cs)
}

// TestLevel3Replicas: two Caddy instances sharing one Redis (and one
// storage, as a cluster does). A challenge issued by A is answered at B
// once; the same answer fails at either; with Redis down handshakes are
// still answered (a challenge is a MAC, nothing is stored) but verify
// fails closed (503, -32000), and they recover by themselves when it is
// back.
func TestLevel3Replicas(t *testing.T) {
	redis := redistest.Start(t)
	storage := sharedStorage(t)
	extra := "level 3\nhandshake terminate\nnonce_store redis " + redis.URL()
	a := startL3Edge(t, extra, nil, storage)
	b := startL3Edge(t, extra, nil, storage)
	w := newWorld(t, a)
	cred := w.jwt(t, func(tm *vc.Template) { tm.Audience = []string{a.hostAudience(), b.hostAudience()} })
	ctx := testContext(t)

	hr := agentHandshake(ctx, t, a, w.agent, 1)
	sc := signAnswer(t, w.agent.key, w.agent.did, hr)
	res := agentVerify(ctx, b, nil, sc, cred, 2).result(t, 2)
	session, _ := res["sessionId"].(string)
	if session == "" {
		t.Fatalf("verify at B: %v", res)
	}
	for _, e := range []*harness{a, b} {
		if code := agentVerify(ctx, e, nil, sc, cred, 3).rpcError(t, 3); code != challenge.CodeReplay {
			t.Errorf("replay at %s: code %d, want %d", e.base, code, challenge.CodeReplay)
		}
	}
	// The session B issued is good at A: the key is in the shared storage.
	cs := a.mustConnect(ctx, "/mcp", http.Header{"X-Mcpi-Handshake-Session": {session}}, legacyProtocol, nil)
	greet(ctx, t, cs)

	hr = agentHandshake(ctx, t, b, w.agent, 4) // issued before the outage
	redis.Stop()
	for _, e := range []*harness{a, b} {
		resp := e.post(ctx, l3HandshakePath, nil, "", map[string]any{"jsonrpc": "2.0", "id": 5, "method": "handshake",
			"params": map[string]any{"agentDid": w.agent.did}})
		if resp.Status != http.StatusOK || resp.rpcError(t, 5) != 0 {
			t.Errorf("handshake at %s with Redis down: HTTP %d %s", e.base, resp.Status, resp.Body)
		}
	}
	resp := agentVerify(ctx, a, nil, signAnswer(t, w.agent.key, w.agent.did, hr), cred, 6)
	if resp.Status != http.StatusServiceUnavailable || resp.rpcError(t, 6) != challenge.CodeStoreUnavailable {
		t.Errorf("verify with Redis down: HTTP %d %s", resp.Status, resp.Body)
	}
	// Sessions are stateless: they keep working during the outage.
	greet(ctx, t, cs)

	redis.Restart() // same port, empty
	hr = agentHandshake(ctx, t, a, w.agent, 8)
	sc = signAnswer(t, w.agent.key, w.agent.did, hr)
	l3Eventually(t, 10*time.Second, "verify at B after Redis came back", func() bool {
		r := agentVerify(ctx, b, nil, sc, cred, 9)
		return r.Status == http.StatusOK && r.rpcError(t, 9) == 0
	})
	if code := agentVerify(ctx, a, nil, sc, cred, 10).rpcError(t, 10); code != challenge.CodeReplay {
		t.Errorf("replay at A after recovery: code %d", code)
	}
}
