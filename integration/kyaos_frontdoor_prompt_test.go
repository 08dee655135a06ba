package integration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestKYAOSPromptLeadsToEdgeConsent: a KYA-OS agent (the Go SDK client,
// its own delegation in KYA-Delegation) calls a tool its delegation lacks
// the scope for. With the front door on and no consent_url, the prompt
// names the edge's own consent page; the user approves there in Chromium;
// the agent's retry with the prompt's resume token goes on, and the
// upstream sees the call once, with the user's hosted DID as its user.
func TestKYAOSPromptLeadsToEdgeConsent(t *testing.T) {
	fd := newKYAFrontDoor(t, "10m")
	b := newBrowser(t)
	b.signIn(frontDoorUser, frontDoorPassword)
	ctx := frontDoorContext(t)

	cs := fd.mustConnect(ctx, mcpserver.Path, http.Header{"KYA-Delegation": {fd.greetOnly(t)}}, legacyProtocol, nil)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		t.Fatalf("whoami without its scope: want the consent prompt, got %+v", res)
	}
	authURL, _ := res.Meta["authorizationUrl"].(string)
	resume, _ := res.Meta["resumeToken"].(string)
	if !strings.HasPrefix(authURL, fd.base+"/oauth/authorize?") || resume == "" {
		t.Fatalf("the prompt must name the edge's consent page and a resume token; _meta = %v", res.Meta)
	}
	u, _ := url.Parse(authURL)
	if got := u.Query().Get("agent_did"); got != fd.agent.did {
		t.Errorf("consent link agent_did = %q, want %q", got, fd.agent.did)
	}
	if n := len(whoamiCalls(fd.upstream.Requests())); n != 0 {
		t.Fatalf("the refused call reached the upstream %d times", n)
	}

	// Before the user approves, the retry is prompted again.
	retry := &mcp.CallToolParams{Name: "whoami", Meta: mcp.Meta{proof.ResumeTokenKey: resume}}
	if res, err := cs.CallTool(ctx, retry); err != nil || !res.IsError {
		t.Fatalf("retry before approval: want the prompt again, got %v %+v", err, res)
	}

	b.do("opening the agent consent page", chromedp.Navigate(authURL),
		chromedp.WaitVisible(chromedp.CSS(`button[name="approve"]`)))
	page := &consentPage{b: b}
	text := page.text()
	for _, want := range []string{fd.agent.did, "whoami", scopeWhoami, scopeGreet} {
		if !strings.Contains(text, want) {
			t.Errorf("the consent page does not show %q:\n%s", want, text)
		}
	}
	page.approve()
	b.do("waiting for the approval", chromedp.WaitVisible(chromedp.CSS(`#agent-consent-done`)))
	if got := page.text(); !strings.Contains(got, "You allowed the agent") {
		t.Fatalf("after approving, the page says:\n%s", got)
	}

	res, err = cs.CallTool(ctx, retry)
	if err != nil || res.IsError {
		t.Fatalf("retry after approval: want the tool's answer, got %v %+v", err, res)
	}
	calls := whoamiCalls(fd.upstream.Requests())
	if len(calls) != 1 {
		t.Fatalf("the upstream got whoami %d times, want once", len(calls))
	}
	if got := calls[0].Header.Get("X-Agent-DID"); got != fd.agent.did {
		t.Errorf("X-Agent-DID upstream = %q, want the agent %q", got, fd.agent.did)
	}
	if got := calls[0].Header.Get("X-User-DID"); !strings.Contains(got, ":oauth:users:") {
		t.Errorf("X-User-DID upstream = %q, want the user's DID hosted by the edge", got)
	}

	// The approval admits one retry: the same retry again is prompted.
	if res, err := cs.CallTool(ctx, retry); err != nil || !res.IsError {
		t.Fatalf("a second retry with the approved token: want the prompt, got %v %+v", err, res)
	}
	if n := len(whoamiCalls(fd.upstream.Requests())); n != 1 {
		t.Fatalf("the upstream got whoami %d times after a second retry, want still once", n)
	}

	// The approval was for this agent: another agent's retry with the same
	// token is prompted.
	other := newParty(t, didresolver.Ed25519)
	tok := issueJWT(t, fd.issuer.key, fd.issuer.kid, vc.Template{
		AgentDID: other.did, UserDID: fd.user.did, Audience: []string{fd.hostAudience()},
		Scopes: []string{scopeGreet}, ExpiresAt: time.Now().Add(time.Hour),
	})
	cs2 := fd.mustConnect(ctx, mcpserver.Path, http.Header{"KYA-Delegation": {tok}}, legacyProtocol, nil)
	if res, err := cs2.CallTool(ctx, retry); err != nil || !res.IsError {
		t.Fatalf("another agent's retry with the approved token: want the prompt, got %v %+v", err, res)
	}
	if n := len(whoamiCalls(fd.upstream.Requests())); n != 1 {
		t.Errorf("the upstream got whoami %d times, want still once", n)
	}
}
