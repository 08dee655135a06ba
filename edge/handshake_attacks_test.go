package edge

// Attacks on the Level 3 handshake and on edge sessions that the edge
// refuses.

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestLegacyPassFoldedParams: with `legacy_handshake pass`,
// handshake.IsLegacyForm decides that a body is a legacy tools/call of
// _mcpi by looking at "params". Go's encoding/json, which upstreams such as
// mark3labs/mcp-go decode with, matches member names with Unicode simple
// folding, in which U+017F LATIN SMALL LETTER LONG S equals "s": "paramſ"
// IS "params" to it, and the last one wins. strings.ToLower("paramſ") is
// "paramſ": when the edge compared lower-cased names it saw one params
// object (name _mcpi) and passed the call without any credential, skipping
// the tool policy too (passLegacy calls next directly), while the upstream
// ran the tool named in "paramſ". Names are now compared by their fold key
// (internal/jsonkey), and a case variant of a member the edge reads is no
// legacy form.
func TestLegacyPassFoldedParams(t *testing.T) {
	f := newFixture(t)
	h := f.l3Handler(t, func(c *setup) {
		c.LegacyHandshake = LegacyPass
		c.Tools = []ToolPolicy{{Name: "delete_everything", Scopes: []string{"admin:all"}}}
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

// TestSessionIgnoresRouteTrust: edge sessions were HMACed with one
// key per Caddy storage (mcpi/handshake_session_key), shared by
// every mcpi handler of every site and route using that storage, and
// the session check re-checked only audience and
// require_scopes, never the route's trust list. A session obtained on a
// permissive route (trust any) with a self-issued credential was accepted
// on a strict route whose trust list does not contain the issuer. The
// self-issued credential names the strict route's audience too, so
// require_audience does not help. Each handler now derives its session key
// from the stored one and its acceptance policy, and the session's root
// issuer is checked against the route's trust on every use.
func TestSessionIgnoresRouteTrust(t *testing.T) {
	f := newFixture(t)
	mallory := newParty(t) // self-made issuer, trusted nowhere but on the open route
	agent := newParty(t)
	open := provision(t, Config{TrustedIssuers: []string{"*"}, Level: 3})
	strict := provision(t, Config{TrustedIssuers: []string{f.user.did}, Level: 3, RequireAudience: true,
		Audiences: []string{"https://" + testHost}})
	// In a real Caddy both handlers derive their session keys from the one
	// key kept in storage (TestSessionCrossRouteTrust shows it end
	// to end).
	useStoredSessionKey(t, open, strict)

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

	for _, tc := range []struct {
		name, reason string
		setup        func()
	}{
		// Another trust list, another session key: not a session of
		// this route.
		{"derived keys", "bad_signature", func() {}},
		// Defence in depth: were the keys the same, the session's root
		// issuer is still checked against this route's trust.
		{"one key", "untrusted_issuer", func() { strict.l3.UseSessions(open.l3.Sessions()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Set("X-Mcpi-Handshake-Session", vr.SessionID)
			res := serve(t, strict, r)
			if res.called {
				user, _ := res.repl.GetString("mcpi.user_did")
				issuer, _ := res.repl.GetString("mcpi.issuer")
				t.Fatalf("BYPASS: strict route (trust %s) admitted a session for a credential issued by the untrusted %s; user_did=%q issuer=%q",
					f.user.did, mallory.did, user, issuer)
			}
			if res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != tc.reason {
				t.Fatalf("HTTP %d %s, want 401 %s", res.rec.Code, res.rec.Body, tc.reason)
			}
		})
	}
	// The open route keeps its session.
	r = newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set("X-Mcpi-Handshake-Session", vr.SessionID)
	if res := serve(t, open, r); !res.called {
		t.Fatalf("the open route refused its own session: HTTP %d %s", res.rec.Code, res.rec.Body)
	}
}

// useStoredSessionKey gives the handlers the session keys they would
// derive from one key kept in a shared Caddy storage.
func useStoredSessionKey(t *testing.T, hs ...*Handler) {
	t.Helper()
	stored := make([]byte, handshake.SessionKeySize)
	if _, err := rand.Read(stored); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		key, err := handshake.DeriveKey(stored, h.cfg.acceptancePolicy())
		if err != nil {
			t.Fatal(err)
		}
		h.l3.UseSessions(handshake.NewSessions(key, time.Duration(h.cfg.SessionTTL)))
	}
}

// TestChallengeBurnedByOtherAgent: docs/security.md §4 says "a nonce
// is consumed only by an answer signed by a key in the agent's
// authentication". challenge.Service.Verify used to check the signature
// against the agent DID named in the answer, then consume the nonce, and
// only then compare the record's challenge and agent DID: agent B, knowing
// A's nonce (and challenge), signed it with B's own key as B, the nonce was
// consumed and A's legitimate answer afterwards refused as a replay. The
// store is now peeked first (challenge.Peeker) and consumed only by the
// right answer.
func TestChallengeBurnedByOtherAgent(t *testing.T) {
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

// TestProxyVerifyCaseVariantCredential: in handshake proxy mode the
// edge verifies params.credential and forwards the body verbatim, with the
// Level 2 headers of what it verified. An upstream on encoding/json reads
// "Credential" (given after "credential") as the credential: it would
// receive a credential the edge never checked, alongside identity headers
// that vouch for another one. challenge.ParseRequest now refuses members
// that repeat or fold together (-32602), so nothing is forwarded.
func TestProxyVerifyCaseVariantCredential(t *testing.T) {
	f := newFixture(t)
	up := newFakeUpstream(t, "/rpc/hs", "/rpc/vf")
	next := up.handler()
	h := f.l3Handler(t, func(c *setup) {
		c.Handshake = HandshakeProxy
		c.HandshakeEndpoint, c.VerifyEndpoint = "/rpc/hs", "/rpc/vf"
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
