package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestLevel3SessionKeepsRouteTrust: one Caddy, one storage, two routes to
// the same MCP server: /open/* trusts any issuer, everything else trusts
// only the operator's issuer. Both run Level 3 (terminate). Mallory mints
// herself a credential (did:key issuer) naming the operator's user, runs the
// handshake on /open/* and presents the edge session on the strict route.
// A session key shared by the routes, or a session check that skipped
// trust, would admit her with X-User-DID = the operator's user. Each route
// derives its own session key from the stored one and its acceptance
// policy, and checks the session's root issuer against its trust list.
func TestLevel3SessionKeepsRouteTrust(t *testing.T) {
	operatorIssuer := newParty(t, didresolver.Ed25519)
	user := newParty(t, didresolver.Ed25519)
	mallory := newParty(t, didresolver.Ed25519)
	agent := newParty(t, didresolver.Ed25519)

	rec := &recorder{next: mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	site := fmt.Sprintf(`:%d {
	bind 127.0.0.1
	handle_path /open/* {
		mcpi {
			trust any
			level 3
		}
		reverse_proxy %[2]s
	}
	handle {
		mcpi {
			trust %[3]s
			require_audience
			level 3
		}
		reverse_proxy %[2]s
	}
}
`, h.port, up.Listener.Addr().String(), operatorIssuer.did)
	h.start(dir, testCaddyfile(freePort(t), filepath.Join(dir, "storage"), site))
	ctx := testContext(t)

	now := time.Now()
	cred := issueJWT(t, mallory.key, mallory.kid, vc.Template{
		AgentDID: agent.did, UserDID: user.did,
		Audience:  []string{h.hostAudience()},
		Scopes:    []string{"greet:execute", "admin:all"},
		NotBefore: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour),
	})

	// The strict route refuses the credential itself.
	init := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": legacyProtocol, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "m", "version": "0"}}}
	if resp := h.post(ctx, "/mcp", http.Header{"Authorization": {"Bearer " + cred}}, "", init); resp.Status != http.StatusUnauthorized {
		t.Fatalf("precondition: strict route answered the untrusted credential with HTTP %d", resp.Status)
	}

	// Handshake on the open route.
	resp := h.post(ctx, "/open"+l3HandshakePath, nil, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "handshake",
		"params": map[string]any{"agentDid": agent.did, "supportedMethods": []string{"Ed25519"}, "version": "1.0"}})
	var hr challenge.HandshakeResult
	raw, _ := json.Marshal(resp.result(t, 1))
	if err := json.Unmarshal(raw, &hr); err != nil || hr.Nonce == "" {
		t.Fatalf("handshake: %s", resp.Body)
	}
	resp = h.post(ctx, "/open"+l3VerifyPath, nil, "", map[string]any{"jsonrpc": "2.0", "id": 2, "method": "verify",
		"params": map[string]any{"signedChallenge": signAnswer(t, agent.key, agent.did, hr), "credential": cred}})
	session, _ := resp.result(t, 2)["sessionId"].(string)
	if session == "" {
		t.Fatalf("verify: %s", resp.Body)
	}

	// The open route admits its own session.
	if resp := h.post(ctx, "/open/mcp", http.Header{"X-Mcpi-Handshake-Session": {session}}, "", init); resp.Status != http.StatusOK {
		t.Fatalf("precondition: the open route refused its own session: HTTP %d %s", resp.Status, resp.Body)
	}

	h.upstream.Reset()
	resp = h.post(ctx, "/mcp", http.Header{"X-Mcpi-Handshake-Session": {session}}, "", init)
	if resp.Status == http.StatusOK {
		var got string
		for _, r := range h.upstream.Requests() {
			got = r.Header.Get("X-User-Did")
		}
		t.Fatalf("BYPASS: the strict route (trust %s) admitted a session for mallory's self-issued credential; upstream saw X-User-DID %q (the operator's user is %s)",
			operatorIssuer.did, got, user.did)
	}
	if resp.Status != http.StatusUnauthorized || len(h.upstream.Requests()) != 0 {
		t.Fatalf("strict route: HTTP %d %s, %d upstream requests; want 401 and none", resp.Status, resp.Body, len(h.upstream.Requests()))
	}
}
