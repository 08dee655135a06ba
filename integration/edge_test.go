package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestCarriersSDK: a real MCP client (initialize, tools/list, tools/call)
// gets through the edge with a valid credential in each header carrier, and
// the upstream sees the MCP traffic but neither the carrier nor the token.
func TestCarriersSDK(t *testing.T) {
	h := newHarness(t, siteConfig{})
	w := newWorld(t, h)
	tok := w.jwt(t)

	cases := []struct {
		name    string
		header  http.Header
		version string
	}{
		{"authorization", http.Header{"Authorization": {"Bearer " + tok}}, legacyProtocol},
		{"kya-delegation", http.Header{"KYA-Delegation": {tok}}, legacyProtocol},
		{"kya-os-delegation-credential", http.Header{"KYA-OS-Delegation-Credential": {tok}}, legacyProtocol},
		{"mcp-i-credential", http.Header{"MCP-I-Credential": {tok}, "MCP-I-Delegation": {"urn:uuid:demo"}}, legacyProtocol},
		// The SDK's default protocol is sessionless (server/discover, no
		// initialize): it must work through the edge too.
		{"authorization/latest-protocol", http.Header{"Authorization": {"Bearer " + tok}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h.upstream.Reset()
			ctx := testContext(t)
			cs, err := h.connect(ctx, "/mcp", tc.header, tc.version, nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if len(tools.Tools) != 3 {
				t.Errorf("tools/list returned %d tools, want 3", len(tools.Tools))
			}
			greet(ctx, t, cs)

			reqs := h.upstream.Requests()
			methods := rpcMethods(reqs)
			want := []string{"initialize", "notifications/initialized", "tools/list", "tools/call"}
			if tc.version == "" {
				want = []string{"server/discover", "tools/list", "tools/call"}
			}
			for _, m := range want {
				if !slices.Contains(methods, m) {
					t.Errorf("upstream never saw %s (saw %v)", m, methods)
				}
			}
			assertNotForwarded(t, reqs, tok)
		})
	}
}

// TestCarriersBody: the two JSON-RPC body carriers, which the SDK client
// cannot produce, through raw POSTs on one session: the handshake and
// tools/list with params.delegationToken, then tools/call with a JSON VC (and
// with a JWT string) in arguments._mcpi_delegation. The edge must strip the
// carrier from the body and leave the rest intact.
func TestCarriersBody(t *testing.T) {
	h := newHarness(t, siteConfig{})
	w := newWorld(t, h)
	ctx := testContext(t)
	tok := w.jwt(t)
	jsonCred, proofValue := w.jsonVC(t)

	session := h.initialize(ctx, "/mcp", nil, map[string]any{"delegationToken": tok})

	resp := h.post(ctx, "/mcp", nil, session, map[string]any{
		"jsonrpc": "2.0", "id": 2, "method": "tools/list",
		"params": map[string]any{"delegationToken": tok},
	})
	if resp.Status != http.StatusOK {
		t.Fatalf("tools/list: HTTP %d %s", resp.Status, resp.Body)
	}
	if tools, _ := resp.result(t, 2)["tools"].([]any); len(tools) != 3 {
		t.Errorf("tools/list: %s", resp.Body)
	}

	calls := []struct {
		name   string
		params map[string]any
	}{
		{"delegationToken", map[string]any{"name": "greet", "arguments": map[string]any{"name": "Ada"}, "delegationToken": tok}},
		{"_mcpi_delegation/json-vc", map[string]any{"name": "greet", "arguments": map[string]any{"name": "Ada", "_mcpi_delegation": jsonCred}}},
		{"_mcpi_delegation/jwt-string", map[string]any{"name": "greet", "arguments": map[string]any{"name": "Ada", "_mcpi_delegation": tok}}},
	}
	for i, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			h.upstream.Reset()
			id := 10 + i
			resp := h.post(ctx, "/mcp", nil, session, map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": c.params})
			if resp.Status != http.StatusOK {
				t.Fatalf("tools/call: HTTP %d %s", resp.Status, resp.Body)
			}
			res := resp.result(t, id)
			content, _ := res["content"].([]any)
			if len(content) != 1 || res["isError"] == true {
				t.Fatalf("tools/call result %v", res)
			}
			if text := content[0].(map[string]any)["text"]; text != "Hello, Ada" {
				t.Errorf("greet = %v", text)
			}

			reqs := h.upstream.Requests()
			if len(reqs) != 1 {
				t.Fatalf("upstream saw %d requests, want 1", len(reqs))
			}
			// What reached the upstream is the same call minus the carrier,
			// with a Content-Length that matches the rewritten body.
			var got struct {
				Method string `json:"method"`
				Params struct {
					Name      string         `json:"name"`
					Arguments map[string]any `json:"arguments"`
				} `json:"params"`
			}
			if err := json.Unmarshal(reqs[0].Body, &got); err != nil {
				t.Fatalf("upstream body: %v: %s", err, reqs[0].Body)
			}
			if got.Method != "tools/call" || got.Params.Name != "greet" || len(got.Params.Arguments) != 1 || got.Params.Arguments["name"] != "Ada" {
				t.Errorf("upstream body %s", reqs[0].Body)
			}
			if cl := reqs[0].Header.Get("Content-Length"); cl != "" && cl != itoa(len(reqs[0].Body)) {
				t.Errorf("upstream Content-Length %s, body %d bytes", cl, len(reqs[0].Body))
			}
			assertNotForwarded(t, reqs, tok, proofValue)
		})
	}
}

// TestNoCredential: without a credential the edge answers 401 itself with
// the RFC 9728 pointer, the SDK client cannot connect, and nothing reaches
// the upstream.
func TestNoCredential(t *testing.T) {
	h := newHarness(t, siteConfig{})
	ctx := testContext(t)

	t.Run("raw initialize", func(t *testing.T) {
		resp := h.post(ctx, "/mcp", nil, "", map[string]any{
			"jsonrpc": "2.0", "id": 1, "method": "initialize",
			"params": map[string]any{"protocolVersion": legacyProtocol, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "0"}},
		})
		body := h.assertEdgeError(t, resp, http.StatusUnauthorized, "invalid_token")
		if body.Description != "no delegation credential presented" {
			t.Errorf("error_description %q", body.Description)
		}
	})
	t.Run("GET stream", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		h.assertEdgeError(t, h.do(req), http.StatusUnauthorized, "invalid_token")
	})
	t.Run("non-delegation bearer only", func(t *testing.T) {
		// An OAuth access token is not a delegation: with the default
		// non_delegation_bearer pass it is ignored, so there is none.
		resp := h.post(ctx, "/mcp", http.Header{"Authorization": {"Bearer opaque-oauth-access-token"}}, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
		body := h.assertEdgeError(t, resp, http.StatusUnauthorized, "invalid_token")
		if body.Description != "no delegation credential presented" {
			t.Errorf("error_description %q", body.Description)
		}
	})
	t.Run("SDK client", func(t *testing.T) {
		cs, err := h.connect(ctx, "/mcp", nil, legacyProtocol, nil)
		if err == nil {
			cs.Close()
			t.Fatal("SDK client connected without a credential")
		}
	})
	if reqs := h.upstream.Requests(); len(reqs) != 0 {
		t.Errorf("upstream saw %d requests without a credential: %v", len(reqs), rpcMethods(reqs))
	}
}

// TestRejected: each way a credential can be wrong is a 401 with its stable
// reason (vc.Reason of the sentinel), in the challenge and the body; the
// token is never echoed and the upstream sees nothing. Also the 400 for
// conflicting carriers and the 403 for a missing route scope.
func TestRejected(t *testing.T) {
	trusted := newParty(t, didresolver.Ed25519)
	h := newHarness(t, siteConfig{TrustedIssuer: trusted.did})
	w := newWorld(t, h)
	ctx := testContext(t)
	other := newWorld(t, h)

	trustedTok := issueJWT(t, trusted.key, trusted.kid, w.template())
	cases := []struct {
		name   string
		path   string
		header http.Header
		status int
		errStr string
		// reasons: acceptable vc.Reason values (some inputs are honestly
		// either malformed or an unsupported format).
		reasons []error
	}{
		{name: "ok", path: "/mcp", header: http.Header{"Authorization": {"Bearer " + w.jwt(t)}}, status: http.StatusOK},
		{name: "ok/trusted issuer", path: "/trusted/mcp", header: http.Header{"KYA-Delegation": {trustedTok}}, status: http.StatusOK},
		{name: "ok/same credential in two carriers", path: "/mcp", header: http.Header{"Authorization": {"Bearer " + trustedTok}, "KYA-Delegation": {trustedTok}}, status: http.StatusOK},
		{name: "ok/scoped route with scope", path: "/scoped/mcp", header: http.Header{"KYA-Delegation": {w.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"files:write"} })}}, status: http.StatusOK},
		{
			name: "fail-expired", path: "/mcp", status: http.StatusUnauthorized, errStr: "invalid_token", reasons: []error{vc.ErrExpired},
			header: http.Header{"Authorization": {"Bearer " + w.jwt(t, func(tm *vc.Template) {
				tm.NotBefore, tm.ExpiresAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
			})}},
		},
		{
			name: "fail-not-yet-valid", path: "/mcp", status: http.StatusUnauthorized, errStr: "invalid_token", reasons: []error{vc.ErrNotYetValid},
			header: http.Header{"KYA-Delegation": {w.jwt(t, func(tm *vc.Template) {
				tm.NotBefore, tm.ExpiresAt = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
			})}},
		},
		{
			name: "fail-audience", path: "/mcp", status: http.StatusUnauthorized, errStr: "invalid_token", reasons: []error{vc.ErrAudience},
			header: http.Header{"KYA-Delegation": {w.jwt(t, func(tm *vc.Template) { tm.Audience = []string{"did:web:elsewhere.example"} })}},
		},
		{
			name: "fail-signature", path: "/mcp", status: http.StatusUnauthorized, errStr: "invalid_token", reasons: []error{vc.ErrSignature},
			header: http.Header{"Authorization": {"Bearer " + tamper(w.jwt(t))}},
		},
		{
			name: "fail-untrusted-issuer", path: "/trusted/mcp", status: http.StatusUnauthorized, errStr: "invalid_token", reasons: []error{vc.ErrUntrustedIssuer},
			header: http.Header{"Authorization": {"Bearer " + other.jwt(t)}},
		},
		{
			name: "fail-malformed", path: "/mcp", status: http.StatusUnauthorized, errStr: "invalid_token", reasons: []error{vc.ErrMalformed, vc.ErrUnsupportedFormat},
			header: http.Header{"KYA-Delegation": {"not-a-credential"}},
		},
		{
			name: "fail-conflicting-carriers", path: "/mcp", status: http.StatusBadRequest, errStr: "invalid_request",
			header: http.Header{"Authorization": {"Bearer " + w.jwt(t)}, "KYA-Delegation": {other.jwt(t)}},
		},
		{
			name: "fail-missing-route-scope", path: "/scoped/mcp", status: http.StatusForbidden, errStr: "insufficient_scope",
			header: http.Header{"KYA-Delegation": {w.jwt(t)}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h.upstream.Reset()
			resp := h.post(ctx, tc.path, tc.header, "", map[string]any{
				"jsonrpc": "2.0", "id": 1, "method": "initialize",
				"params": map[string]any{"protocolVersion": legacyProtocol, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "0"}},
			})
			var secrets []string
			for _, vs := range tc.header {
				for _, v := range vs {
					secrets = append(secrets, strings.TrimPrefix(v, "Bearer "))
				}
			}
			if tc.status == http.StatusOK {
				if resp.Status != http.StatusOK {
					t.Fatalf("HTTP %d %s", resp.Status, resp.Body)
				}
				resp.result(t, 1)
				assertNotForwarded(t, h.upstream.Requests(), secrets...)
				return
			}
			body := h.assertEdgeError(t, resp, tc.status, tc.errStr)
			wa := resp.Header.Get("WWW-Authenticate")
			switch tc.status {
			case http.StatusUnauthorized:
				var want []string
				for _, e := range tc.reasons {
					want = append(want, vc.Reason(e))
				}
				if !slices.Contains(want, body.Reason) {
					t.Errorf("reason %q, want one of %v (body %s)", body.Reason, want, resp.Body)
				}
				if !strings.Contains(wa, `error="invalid_token"`) || !strings.Contains(wa, `error_description="`+body.Reason+`"`) {
					t.Errorf("WWW-Authenticate %q, want invalid_token and error_description=%q", wa, body.Reason)
				}
			case http.StatusForbidden:
				if !strings.Contains(wa, `error="insufficient_scope"`) || !strings.Contains(wa, `scope="files:write"`) {
					t.Errorf("WWW-Authenticate %q, want insufficient_scope and scope=\"files:write\"", wa)
				}
			case http.StatusBadRequest:
				if body.Description != "conflicting delegation credentials" {
					t.Errorf("error_description %q", body.Description)
				}
			}
			for _, s := range secrets {
				if strings.Contains(string(resp.Body), s) {
					t.Errorf("response body echoes the presented credential")
				}
				for k, vs := range resp.Header {
					for _, v := range vs {
						if strings.Contains(v, s) {
							t.Errorf("response header %s echoes the presented credential", k)
						}
					}
				}
			}
			if reqs := h.upstream.Requests(); len(reqs) != 0 {
				t.Errorf("upstream saw %d requests for a rejected credential", len(reqs))
			}
		})
	}
}

// spoofHeaders are identity headers a client might forge, in the spellings
// an attacker would try: canonical, lower, upper, mixed, underscores.
var spoofHeaders = http.Header{
	"X-Agent-DID":              {"did:example:mallory"},
	"x-user-did":               {"did:example:mallory-user"},
	"X-VERIFIED-DELEGATION":    {"true"},
	"X-Agent-Reputation-Score": {"100"},
	"KYA-OS-Agent-DID":         {"did:example:mallory"},
	"kya-agent-did":            {"did:example:mallory"},
	"X_Agent_DID":              {"did:example:mallory-underscore"},
	"x_verified_delegation":    {"yes"},
}

// TestSpoofedIdentityHeaders: forged identity headers never reach the
// upstream. With a valid credential the request goes through stripped (on
// /mcp nothing identity-like arrives; on /id/mcp only the edge's verified
// values, set with header_up from the mcpi placeholders); without one it is
// refused before the upstream.
func TestSpoofedIdentityHeaders(t *testing.T) {
	h := newHarness(t, siteConfig{})
	w := newWorld(t, h)
	tok := w.jwt(t)
	hdr := spoofHeaders.Clone()
	hdr["KYA-Delegation"] = []string{tok}

	whoami := func(t *testing.T, path string) map[string]any {
		ctx := testContext(t)
		cs := h.mustConnect(ctx, path, hdr, legacyProtocol, nil)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
		if err != nil || res.IsError {
			t.Fatalf("whoami: %v %+v", err, res)
		}
		sc, ok := res.StructuredContent.(map[string]any)
		if !ok {
			t.Fatalf("whoami structured content %T", res.StructuredContent)
		}
		return sc
	}

	t.Run("valid credential/stripped", func(t *testing.T) {
		h.upstream.Reset()
		id := whoami(t, "/mcp")
		if id["agent_did"] != nil || id["user_did"] != nil || id["verified_delegation"] != false || id["reputation_score"] != nil {
			t.Errorf("whoami saw identity headers: %v", id)
		}
		reqs := h.upstream.Requests()
		if len(reqs) == 0 {
			t.Fatal("upstream saw nothing")
		}
		for i, r := range reqs {
			if got := identityHeaders(r.Header); len(got) != 0 {
				t.Errorf("upstream request %d (%s) carried %v", i, r.Method, got)
			}
		}
		assertNotForwarded(t, reqs, tok)
	})

	t.Run("valid credential/edge identity", func(t *testing.T) {
		h.upstream.Reset()
		id := whoami(t, "/id/mcp")
		if id["agent_did"] != w.agent.did || id["user_did"] != w.user.did || id["verified_delegation"] != false {
			t.Errorf("whoami = %v, want agent %s user %s", id, w.agent.did, w.user.did)
		}
		for i, r := range h.upstream.Requests() {
			// Exactly the edge's values, once: the forged copies are gone
			// whatever their spelling.
			if got := r.Header["X-Agent-Did"]; len(got) != 1 || got[0] != w.agent.did {
				t.Errorf("upstream request %d X-Agent-DID = %q", i, got)
			}
			if got := r.Header["X-User-Did"]; len(got) != 1 || got[0] != w.user.did {
				t.Errorf("upstream request %d X-User-DID = %q", i, got)
			}
			if got := identityHeaders(r.Header); !slices.Equal(got, []string{"X-Agent-Did", "X-User-Did"}) {
				t.Errorf("upstream request %d identity headers %v", i, got)
			}
			// The other placeholders the handler sets.
			if got := r.Header.Get("X-Edge-Scopes"); got != "greet:execute files:read" {
				t.Errorf("{mcpi.scopes} = %q", got)
			}
			if got := r.Header.Get("X-Edge-Issuer"); got != w.issuer.did {
				t.Errorf("{mcpi.issuer} = %q, want %s", got, w.issuer.did)
			}
			if got := r.Header.Get("X-Edge-User-Id"); got != w.agent.did {
				t.Errorf("{http.auth.user.id} = %q, want the agent DID", got)
			}
			if got := r.Header.Get("X-Edge-Delegation-Id"); got == "" {
				t.Errorf("{mcpi.delegation_id} is empty")
			}
		}
	})

	t.Run("no credential", func(t *testing.T) {
		h.upstream.Reset()
		ctx := testContext(t)
		resp := h.post(ctx, "/mcp", spoofHeaders, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
		h.assertEdgeError(t, resp, http.StatusUnauthorized, "invalid_token")
		if reqs := h.upstream.Requests(); len(reqs) != 0 {
			t.Errorf("upstream saw %d requests", len(reqs))
		}
	})
}

// TestNonDelegationBearerPassesThrough: an OAuth bearer next to a delegation
// in KYA-Delegation belongs to someone else (the upstream's own auth), so the
// edge leaves it alone while still stripping the delegation.
func TestNonDelegationBearerPassesThrough(t *testing.T) {
	h := newHarness(t, siteConfig{})
	w := newWorld(t, h)
	ctx := testContext(t)
	tok := w.jwt(t)
	const oauth = "Bearer opaque-oauth-access-token"
	cs := h.mustConnect(ctx, "/mcp", http.Header{"Authorization": {oauth}, "KYA-Delegation": {tok}}, legacyProtocol, nil)
	greet(ctx, t, cs)
	reqs := h.upstream.Requests()
	for i, r := range reqs {
		if got := r.Header.Values("Authorization"); len(got) != 1 || got[0] != oauth {
			t.Errorf("upstream request %d Authorization = %q, want the OAuth bearer untouched", i, got)
		}
		if r.Header.Get("KYA-Delegation") != "" {
			t.Errorf("upstream request %d carried KYA-Delegation", i)
		}
		for _, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, tok) {
					t.Errorf("upstream request %d carried the delegation", i)
				}
			}
		}
	}
}

// TestSSEUnbuffered: event streams pass through the edge as they are
// written. The POST case: progress notifications of a slow tool reach the
// client as they are sent, not bunched with the result. The tool sends one
// notification per countInterval and returns one interval after the last, so
// with streaming the first arrives about 3 intervals before the result; a
// buffering edge would deliver all of them with it. The GET case: the
// standalone stream's headers arrive at once, although its body stays open.
func TestSSEUnbuffered(t *testing.T) {
	h := newHarness(t, siteConfig{})
	w := newWorld(t, h)
	ctx := testContext(t)
	tok := w.jwt(t)

	var mu sync.Mutex
	var arrivals []time.Time
	var values []float64
	got := make(chan struct{}, 16)
	opts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		values = append(values, req.Params.Progress)
		mu.Unlock()
		got <- struct{}{}
	}}
	// Without the standalone GET stream (checked separately below), so
	// that a buffering edge shows up here as bunched notifications rather
	// than as a Connect that waits for that stream's headers.
	cs, err := h.connectWith(ctx, "/mcp", http.Header{"Authorization": {"Bearer " + tok}}, legacyProtocol, opts,
		func(tr *mcp.StreamableClientTransport) { tr.DisableStandaloneSSE = true })
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()

	const n = 3
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": n}, Meta: mcp.Meta{"progressToken": "count-1"}})
	done := time.Now()
	if err != nil || res.IsError {
		t.Fatalf("count: %v %+v", err, res)
	}
	// Notification handlers may run just after the result is delivered;
	// give them a moment (their timestamps are taken on arrival anyway).
	for range n {
		select {
		case <-got:
		case <-time.After(2 * time.Second):
		}
	}
	mu.Lock()
	if len(arrivals) != n || !slices.Equal(values, []float64{1, 2, 3}) {
		mu.Unlock()
		t.Fatalf("got %d progress notifications %v, want %d", len(arrivals), values, n)
	}
	t.Logf("call took %v; notifications at %v, %v, %v", done.Sub(start), arrivals[0].Sub(start), arrivals[1].Sub(start), arrivals[2].Sub(start))
	if lead := done.Sub(arrivals[0]); lead < 2*countInterval {
		t.Errorf("first notification arrived only %v before the result (want >= %v): the edge buffers the stream", lead, 2*countInterval)
	}
	for i := 1; i < n; i++ {
		if gap := arrivals[i].Sub(arrivals[i-1]); gap < countInterval/3 {
			t.Errorf("notifications %d and %d arrived %v apart (sent %v apart): bunched", i, i+1, gap, countInterval)
		}
	}
	mu.Unlock()

	t.Run("standalone GET stream", func(t *testing.T) {
		reqCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		req, _ := http.NewRequestWithContext(reqCtx, http.MethodGet, h.base+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", legacyProtocol)
		req.Header.Set("Authorization", "Bearer "+tok)
		start := time.Now()
		resp, err := (&http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 3 * time.Second}}).Do(req)
		if err != nil {
			t.Fatalf("GET stream: %v (a buffering edge holds the headers until the stream ends)", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("GET stream: HTTP %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		t.Logf("stream headers after %v", time.Since(start))
	})
}

// TestProtectedResourceMetadata: the edge serves RFC 9728 metadata itself,
// without a credential, and the upstream never sees the request.
func TestProtectedResourceMetadata(t *testing.T) {
	h := newHarness(t, siteConfig{})
	ctx := testContext(t)
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		t.Run(path, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.base+path, nil)
			resp := h.do(req)
			if resp.Status != http.StatusOK {
				t.Fatalf("HTTP %d %s", resp.Status, resp.Body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			var md struct {
				Resource             string   `json:"resource"`
				AuthorizationServers []string `json:"authorization_servers"`
				BearerMethods        []string `json:"bearer_methods_supported"`
				Levels               []any    `json:"mcpi_levels_supported"`
			}
			if err := json.Unmarshal(resp.Body, &md); err != nil {
				t.Fatalf("not JSON: %v: %s", err, resp.Body)
			}
			if !strings.HasPrefix(md.Resource, h.base) {
				t.Errorf("resource %q, want %s (the request's scheme and host)", md.Resource, h.base)
			}
			if !slices.Equal(md.AuthorizationServers, []string{"https://auth.example.test"}) {
				t.Errorf("authorization_servers %v", md.AuthorizationServers)
			}
			if !slices.Equal(md.BearerMethods, []string{"header"}) {
				t.Errorf("bearer_methods_supported %v", md.BearerMethods)
			}
			if len(md.Levels) == 0 {
				t.Errorf("mcpi_levels_supported missing: %s", resp.Body)
			}
		})
	}
	if reqs := h.upstream.Requests(); len(reqs) != 0 {
		t.Errorf("upstream saw %d requests", len(reqs))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
