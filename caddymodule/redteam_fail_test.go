//go:build redteam

// Red-team tests that FAIL on the current code: each one demonstrates a
// bypass or a broken guarantee. They are behind the redteam build tag so the
// branch stays green; run them with
//
//	go test -race -tags redteam ./caddymodule/ -run Redteam
package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestRedteamSessionIgnoresRouteTrust: edge sessions are HMACed with one key
// per Caddy storage (mcpi/handshake_session_key, session.go), shared by every
// mcpi handler of every site and route using that storage. sessionFrom /
// checkSessionRoute re-check only audience and require_scopes, never the
// route's trust list. A session obtained on a permissive route (trust any)
// with a self-issued credential is therefore accepted on a strict route
// whose trust list does not contain the issuer. The self-issued credential
// names the strict route's audience too, so require_audience does not help.
//
// In a real Caddy both handlers load the same key from storage; here the
// second handler is given the first one's key to model that (the
// integration test TestRedteamSessionCrossRouteTrust shows it end to end).
func TestRedteamSessionIgnoresRouteTrust(t *testing.T) {
	f := newFixture(t)
	mallory := newParty(t) // self-made issuer, trusted nowhere but on the open route
	agent := newParty(t)
	open := provision(t, &Handler{TrustedIssuers: []string{"*"}, Level: 3})
	strict := provision(t, &Handler{TrustedIssuers: []string{f.user.did}, Level: 3, RequireAudience: true,
		Audiences: []string{"https://" + testHost}})
	strict.l3.sessions.key = open.l3.sessions.key // shared Caddy storage

	now := time.Now()
	cred, err := vc.IssueJWT(mallory.priv, mallory.kid, vc.Template{
		AgentDID: agent.did, UserDID: f.user.did, // impersonates the trusted user
		Audience:  []string{"https://" + testHost},
		Scopes:    []string{"tools:read", "echo:execute", "admin:all"},
		NotBefore: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}

	// The strict route refuses the credential itself.
	r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set("Authorization", "Bearer "+cred)
	if res := serve(t, strict, r); res.called || res.rec.Code != http.StatusUnauthorized {
		t.Fatalf("precondition: strict route admitted the untrusted credential (%d)", res.rec.Code)
	}

	// The open route runs the handshake and issues a session.
	hr := doHandshake(t, open, defaultHandshakePath, agent, nil)
	rep := rpcCall(t, open, defaultVerifyPath, verifyMsg(2, answer(t, agent, hr), cred), nil)
	var vr challenge.VerifyResult
	if err := json.Unmarshal(rep.Result, &vr); err != nil || vr.SessionID == "" {
		t.Fatalf("verify on the open route: %s", rep.Raw)
	}

	r = newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set("X-Mcpi-Handshake-Session", vr.SessionID)
	res := serve(t, strict, r)
	if res.called {
		user, _ := res.repl.GetString("mcpi.user_did")
		issuer, _ := res.repl.GetString("mcpi.issuer")
		t.Fatalf("BYPASS: strict route (trust %s) admitted a session for a credential issued by the untrusted %s; user_did=%q issuer=%q",
			f.user.did, mallory.did, user, issuer)
	}
}

// TestRedteamToolsListDuplicateIDs: RequestMethods (mcp/jsonrpc.go) maps
// each request id to ONE method, the last one in the batch. A batch that
// sends tools/list and ping under the same id makes the edge believe the
// id answers ping, and FilterResponseBody (mcp/toolslist.go) leaves a
// response to a known non-tools/list id alone: the full tool list goes to
// the caller, here an anonymous one. IDKey also merges 1 and 1.0.
func TestRedteamToolsListDuplicateIDs(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	for _, tc := range []struct{ name, body string }{
		{"same id", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`},
		{"1 and 1.0", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":1.0,"method":"ping"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An upstream answers each request with the id it carried (the
			// go-sdk echoes 1.0 as 1).
			reply := func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, "[%s,%s]", polToolsListResult(1), `{"jsonrpc":"2.0","id":1,"result":{}}`)
			}
			res := polServe(t, h, polPost(tc.body, ""), reply)
			if !res.called {
				t.Fatalf("precondition: anonymous batch of tools/list and ping not admitted: %d %s", res.rec.Code, res.rec.Body)
			}
			var msgs []rpcMsg
			if err := json.Unmarshal(res.rec.Body.Bytes(), &msgs); err != nil {
				t.Fatalf("answer %s: %v", res.rec.Body, err)
			}
			var listed []string
			for _, m := range msgs {
				listed = append(listed, m.toolNames()...)
			}
			if slices.ContainsFunc(listed, func(n string) bool { return n != "public" }) {
				t.Fatalf("BYPASS: anonymous caller got the unfiltered tool list %v", listed)
			}
		})
	}
}

// TestRedteamPolicyOnlyForUppercasePOST: enforcePolicy (policy.go) applies
// the per-tool policy when r.Method == "POST" only. Go's server keeps the
// method as sent, and Caddy's reverse_proxy forwards it as is, so a
// verified agent's denied tools/call sent as "post" (or PUT, PATCH) is
// forwarded without the tool check. The Go SDK and Node refuse such
// methods, but a server that routes methods case-insensitively, or takes
// JSON-RPC over any method, runs the tool.
func TestRedteamPolicyOnlyForUppercasePOST(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	for _, m := range []string{"post", "PUT", "PATCH"} {
		r := polPost(polCall(1, "files_write"), tok)
		r.Method = m
		if res := polServe(t, h, r, nil); res.called {
			t.Errorf("WEAK: denied tools/call sent with method %q forwarded to the upstream", m)
		}
	}
}
