package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// An agent that signs child credentials for DIDs it invents, each
// presented with the chain up to the trusted user, does not get a fresh
// counter per child through the real Caddy: a limit keyed by agent counts
// the chain's first agent, so the children share the agent's limit and the
// upstream sees no more than it allows.
func TestRateLimitSubDelegationSharesTheAgentsLimit(t *testing.T) {
	user := newParty(t, didresolver.Ed25519)
	rec := &recorder{next: jsonRPCUpstream()}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	site := fmt.Sprintf(`:%d {
	bind 127.0.0.1
	handle {
		mcpi {
			trust %s
			rate_limit agent 3/1h
		}
		reverse_proxy %s
	}
}
`, h.port, user.did, up.Listener.Addr().String())
	h.start(t.TempDir(), testCaddyfile(freePort(t), sharedStorage(t), site))
	w := newWorld(t, h)

	now := time.Now()
	rootTok := issueJWT(t, user.key, user.kid, w.template(func(tm *vc.Template) {
		tm.UserDID = user.did
		tm.ID = "urn:uuid:rl-root"
		tm.NotBefore, tm.ExpiresAt = now.Add(-2*time.Minute), now.Add(2*time.Hour)
	}))
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(cred string, chain ...string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, h.base+"/mcp", strings.NewReader(rlCall(1, "search")))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+cred)
		if len(chain) > 0 {
			req.Header.Set("KYA-OS-Delegation-Chain", strings.Join(chain, ", "))
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("status %d %s", resp.StatusCode, b)
		}
		return resp.StatusCode
	}

	admitted := 0
	if post(rootTok) == http.StatusOK {
		admitted++
	}
	for i := range 6 {
		child := dlgChild(t, w.agent, w.template(func(tm *vc.Template) {
			tm.UserDID = ""
			tm.AgentDID = newParty(t, didresolver.Ed25519).did
			tm.ID = fmt.Sprintf("urn:uuid:rl-child-%d", i)
		}), "rl-root")
		if post(child, rootTok) == http.StatusOK {
			admitted++
		}
	}
	if admitted != 3 {
		t.Errorf("%d of 7 calls by the agent and its invented children admitted, want 3 (the agent's limit)", admitted)
	}
	if n := len(rec.Requests()); n != admitted {
		t.Errorf("the upstream got %d calls, %d were admitted", n, admitted)
	}
}
