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
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestRedteamLegacyPassFoldedParams: with `legacy_handshake pass`,
// isLegacyForm (handshake.go) decides that a body is a legacy tools/call of
// _mcpi by looking at "params", and refuses repeated member names by
// comparing strings.ToLower of them. Go's encoding/json, which upstreams such
// as mark3labs/mcp-go decode with, matches member names with its own fold,
// in which U+017F LATIN SMALL LETTER LONG S equals "s": "paramſ" IS "params"
// to it, and the last one wins. strings.ToLower("paramſ") is "paramſ", so the
// edge sees one params object (name _mcpi) and passes the call without any
// credential, skipping the tool policy too (passLegacy calls next directly),
// while the upstream runs the tool named in "paramſ".
func TestRedteamLegacyPassFoldedParams(t *testing.T) {
	f := newFixture(t)
	h := f.l3Handler(t, func(h *Handler) {
		h.LegacyHandshake = legacyPass
		h.Tools = []ToolPolicy{{Name: "delete_everything", Scopes: []string{"admin:all"}}}
	})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi","arguments":{}},` +
		`"paramſ":{"name":"delete_everything","arguments":{"confirm":true}}}`

	// What an encoding/json upstream executes.
	var up struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(body), &up); err != nil || up.Params.Name != "delete_everything" {
		t.Fatalf("precondition: encoding/json reads tool %q (%v)", up.Params.Name, err)
	}

	res := serve(t, h, newRequest(http.MethodPost, "/mcp", body))
	if res.called {
		t.Fatalf("BYPASS: anonymous tools/call of %q forwarded under legacy_handshake pass (HTTP %d); forwarded body %s",
			up.Params.Name, res.rec.Code, res.fwdBody)
	}
}

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

// TestRedteamChallengeBurnedByOtherAgent: docs/security.md §4 says "a nonce
// is consumed only by an answer signed by a key in the agent's
// authentication". challenge.Service.Verify checks the signature against
// the agent DID named in the answer, then consumes the nonce, and only then
// compares the record's challenge and agent DID. Agent B, knowing A's nonce
// (and challenge), signs it with B's own key as B: the nonce is consumed
// and A's legitimate answer afterwards is refused as a replay.
func TestRedteamChallengeBurnedByOtherAgent(t *testing.T) {
	f := newFixture(t)
	h := f.l3Handler(t, nil)
	mallory := newParty(t)
	for _, tc := range []struct {
		name string
		burn func(hr challenge.HandshakeResult) challenge.SignedChallenge
	}{
		// A's challenge and nonce, signed by and naming mallory.
		{"answer by another agent", func(hr challenge.HandshakeResult) challenge.SignedChallenge { return answer(t, mallory, hr) }},
		// A's nonce with another challenge, validly signed (by mallory).
		{"wrong challenge", func(hr challenge.HandshakeResult) challenge.SignedChallenge {
			return answer(t, mallory, challenge.HandshakeResult{Challenge: "00", Nonce: hr.Nonce})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
			if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(1, tc.burn(hr), f.jwt(t, nil)), nil); rep.Error == nil {
				t.Fatalf("mallory's answer accepted: %s", rep.Raw)
			}
			rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, answer(t, f.agent, hr), f.jwt(t, nil)), nil)
			if rep.Error != nil {
				t.Fatalf("BROKEN GUARANTEE: the agent's own answer is refused after another party burned its challenge: code %d %s",
					rep.code(), rep.Error.Message)
			}
		})
	}
}

// TestRedteamProxyVerifyCaseVariantCredential: in handshake proxy mode the
// edge verifies params.credential (challenge.ParseVerifyParams reads params
// into a map: exact, case-sensitive names) and forwards the body verbatim,
// with the Level 2 headers of what it verified. An upstream on
// encoding/json reads "Credential" (given after "credential") as the
// credential: it receives a credential the edge never checked, alongside
// identity headers that vouch for another one.
func TestRedteamProxyVerifyCaseVariantCredential(t *testing.T) {
	f := newFixture(t)
	up := newFakeUpstream(t, "/rpc/hs", "/rpc/vf")
	next := up.handler()
	h := f.l3Handler(t, func(h *Handler) {
		h.Handshake = handshakeProxy
		h.HandshakeEndpoint, h.VerifyEndpoint = "/rpc/hs", "/rpc/vf"
	})
	hr := doHandshake(t, h, defaultHandshakePath, f.agent, next)
	up.drain()

	forged := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"admin:all"} })
	forged = forged[:strings.LastIndexByte(forged, '.')+1] + "AAAA" // unsigned
	sc := answer(t, f.agent, hr)
	scJSON, _ := json.Marshal(sc)
	fixed := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"verify","params":{"signedChallenge":%s,"credential":%q,"Credential":%q}}`,
		scJSON, f.jwt(t, nil), forged)

	var upView struct {
		Params struct {
			Credential string `json:"credential"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(fixed), &upView); err != nil || upView.Params.Credential != forged {
		t.Fatalf("precondition: encoding/json does not read the forged credential from %s", fixed)
	}
	rec, _ := l3Serve(t, h, newRequest(http.MethodPost, defaultVerifyPath, fixed), next)
	for _, got := range up.drain() {
		if got.Path == "/rpc/vf" {
			t.Fatalf("WEAK: verify with a second, case-variant credential forwarded to the upstream (HTTP %d), X-Agent-DID %q",
				rec.Code, got.Header.Get("X-Agent-Did"))
		}
	}
}
