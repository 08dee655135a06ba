package integration

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFrontDoorMCPRemote: mcp-remote 0.15.1, started with no credential,
// gets a delegation through the edge's own front door. It discovers the
// authorization server, registers, sends the user to the consent page
// (headless Chromium signs in with basic_auth, unticks one scope, approves),
// exchanges the code, and its tools/list and tools/call reach the upstream
// with the identity of the new delegation: the user's DID hosted by the
// edge, the agent's DID from the credential. The unticked scope's tool is
// neither listed nor callable.
func TestFrontDoorMCPRemote(t *testing.T) {
	fd := newFrontDoor(t)
	b := newBrowser(t)
	b.signIn(frontDoorUser, frontDoorPassword)
	ctx := frontDoorContext(t)

	cs, remote := connectMCPRemote(ctx, t, fd.mcpURL(), func(authURL string, remote *mcpRemote) {
		u, err := url.Parse(authURL)
		if err != nil {
			t.Fatalf("authorization URL %q: %v", authURL, err)
		}
		if want := fd.base + "/oauth/authorize"; !strings.HasPrefix(authURL, want+"?") {
			t.Errorf("mcp-remote was sent to %s, want the edge's %s", u.Scheme+"://"+u.Host+u.Path, want)
		}
		if q := u.Query(); q.Get("code_challenge_method") != "S256" || q.Get("state") == "" {
			t.Errorf("authorization request without S256 PKCE or state: %s", u.RawQuery)
		}

		page := b.openConsent(authURL)
		shot := filepath.Join(t.TempDir(), "consent.png")
		page.screenshot(shot)
		t.Logf("consent page screenshot: %s", shot)

		offered := page.scopes()
		for _, s := range []string{scopeGreet, scopeWhoami, scopeCount} {
			if !slices.Contains(offered, s) {
				t.Errorf("consent page offers scopes %v, missing %s", offered, s)
			}
		}
		if checked := page.checked(); len(checked) != len(offered) {
			t.Errorf("ticked before the user chose: %v of %v; want every requested scope ticked", checked, offered)
		}
		if bad := page.unlabelled(); len(bad) > 0 {
			t.Errorf("form controls without a label: %v", bad)
		}
		text := page.text()
		for _, want := range []string{
			"MCP CLI Proxy",   // the client's own name
			"localhost",       // where the code goes
			fd.mcpURL(),       // the resource
			"greet", "whoami", // the tools each scope opens
		} {
			if !strings.Contains(strings.ToLower(text), strings.ToLower(want)) {
				t.Errorf("consent page does not show %q:\n%s", want, text)
			}
		}

		if !strings.Contains(text, "unverified") && !strings.Contains(text, "not verified") {
			t.Errorf("consent page does not mark the client's name as unverified:\n%s", text)
		}

		page.untick(scopeCount)
		page.approve()
		landed := b.waitLocation(remote.callback)
		if q := mustQuery(t, landed); q.Get("code") == "" || q.Get("iss") != fd.base {
			t.Errorf("redirect after approval: %s; want a code and iss=%s (RFC 9207)", landed, fd.base)
		}
	})
	fd.upstream.Reset()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list through mcp-remote: %v", err)
	}
	if got := listedTools(tools); !slices.Equal(got, []string{"greet", "whoami"}) {
		t.Errorf("tools/list = %v; want greet and whoami (count's scope was unticked)", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil || res.IsError {
		t.Fatalf("tools/call whoami: %v %+v", err, res)
	}
	agent, user := identityOfCall(t, fd.upstream.Requests(), "whoami")
	fd.assertHostedUserDID(ctx, t, user, frontDoorUser)
	if !strings.HasPrefix(agent, "did:") || agent == user {
		t.Errorf("X-Agent-DID %q: want the agent's own DID, not the user's %q", agent, user)
	}

	// What mcp-remote holds is a delegation credential from the user to
	// the agent, for this resource, without the unticked scope.
	tok := remote.tokens(t)
	if !strings.EqualFold(tok.TokenType, "bearer") {
		t.Errorf("token_type %q; mcp-remote proves no key, so want Bearer", tok.TokenType)
	}
	claims := jwtClaims(t, tok.AccessToken)
	if claims["iss"] != user || claims["sub"] != agent {
		t.Errorf("credential iss %v sub %v; want the DIDs the upstream saw: %s, %s", claims["iss"], claims["sub"], user, agent)
	}
	if aud := audiences(claims); !slices.Contains(aud, fd.mcpURL()) {
		t.Errorf("credential aud %v; want the resource %s", aud, fd.mcpURL())
	}
	if payload, _ := json.Marshal(claims); strings.Contains(string(payload), scopeCount) {
		t.Errorf("the unticked scope %s is in the credential: %s", scopeCount, payload)
	} else if !strings.Contains(string(payload), scopeWhoami) {
		t.Errorf("the approved scope %s is not in the credential: %s", scopeWhoami, payload)
	}
	if tok.RefreshToken == "" {
		t.Error("no refresh token: the 1h credential could not be renewed without the user")
	}

	// The unticked scope's tool is refused at the edge with
	// insufficient_scope, and mcp-remote asks the user to step up through
	// the same consent; the user declines.
	fd.upstream.Reset()
	type called struct {
		res *mcp.CallToolResult
		err error
	}
	call := make(chan called, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 1}})
		call <- called{res, err}
	}()
	stepUp, err := remote.nextAuthURL(ctx)
	if err != nil {
		t.Fatalf("no step-up authorization after the refused call: %v", err)
	}
	if q := mustQuery(t, stepUp); !strings.Contains(q.Get("scope"), scopeCount) {
		t.Errorf("step-up asks for scope %q; want it to include the missing %s", q.Get("scope"), scopeCount)
	}
	b.openConsent(stepUp).deny()
	if q := mustQuery(t, b.waitLocation(remote.callback)); q.Get("error") != "access_denied" {
		t.Errorf("redirect after Deny: %v; want error=access_denied", q)
	}
	if c := <-call; c.err == nil && !c.res.IsError {
		t.Errorf("tools/call count succeeded without its scope: %+v", c.res)
	}
	if called := calledTools(fd.upstream.Requests()); slices.Contains(called, "count") {
		t.Errorf("the upstream received a call of count: %v", called)
	}
}

// mustQuery parses the query of a URL.
func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return u.Query()
}
