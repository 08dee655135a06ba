package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/admit"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/edge/wellknown"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestMeasuredStorePeek: the measured store peeks when what it measures
// can, and says unsupported (the handshake then consumes first) when not.
func TestMeasuredStorePeek(t *testing.T) {
	mem := challenge.NewMemoryStore(bareContext(t))
	bg := context.Background()
	rec := challenge.Record{Challenge: "c", ExpiresAt: time.Now().Add(time.Minute)}
	if err := mem.Put(bg, "p1", rec, time.Minute); err != nil {
		t.Fatal(err)
	}
	m := &measuredNonceStore{store: mem, name: "memory"}
	if got, err := m.Peek(bg, "p1"); err != nil || got.Challenge != "c" {
		t.Fatalf("Peek = %+v, %v", got, err)
	}
	if _, err := m.Peek(bg, "none"); !errors.Is(err, challenge.ErrNonceNotFound) {
		t.Fatalf("Peek unknown = %v", err)
	}
	plain := &measuredNonceStore{store: struct{ challenge.NonceStore }{mem}, name: "custom"}
	if _, err := plain.Peek(bg, "p1"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Peek through a store without Peek = %v, want errors.ErrUnsupported", err)
	}
}

func TestTerminateHandshakeAndSession(t *testing.T) {
	f := newFixture(t)
	h := f.l3Handler(t, nil)
	cred := f.jwt(t, nil)

	hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
	if hr.ExpiresIn != 300 || len(hr.SupportedMethods) != 1 || hr.SupportedMethods[0] != "Ed25519" {
		t.Errorf("handshake result %+v", hr)
	}
	sc := answer(t, f.agent, hr)
	rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, sc, cred), nil)
	if rep.Status != http.StatusOK || rep.Error != nil || rep.Next {
		t.Fatalf("verify: HTTP %d next=%t %s", rep.Status, rep.Next, rep.Raw)
	}
	if string(rep.ID) != "2" {
		t.Errorf("id %s", rep.ID)
	}
	var vr challenge.VerifyResult
	if err := json.Unmarshal(rep.Result, &vr); err != nil {
		t.Fatal(err)
	}
	if !vr.Verified || vr.AgentDID != f.agent.did || vr.UserDID != f.user.did || vr.SessionID == "" ||
		!reflect.DeepEqual(vr.Scopes, []string{"tools:read", "echo:execute"}) {
		t.Fatalf("verify result %+v", vr)
	}
	if left := time.Until(vr.ExpiresAt); left < 14*time.Minute || left > 15*time.Minute {
		t.Errorf("session expires in %v, want about 15m", left)
	}
	if strings.Contains(string(rep.Raw), cred) {
		t.Error("verify response echoes the credential")
	}

	// Later requests present only the session.
	for _, hdr := range []string{handshake.HeaderSession, handshake.HeaderMcpSessionID} {
		t.Run(hdr, func(t *testing.T) {
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Set(hdr, vr.SessionID)
			res := serve(t, h, r)
			if !res.called {
				t.Fatalf("next not called: %d %s", res.rec.Code, res.rec.Body)
			}
			if got := res.fwd.Header.Get(hdr); got != vr.SessionID {
				t.Errorf("%s not forwarded intact: %q", hdr, got)
			}
			for k, v := range map[string]string{"mcpi.agent_did": f.agent.did, "mcpi.user_did": f.user.did, "mcpi.scopes": "tools:read echo:execute", "mcpi.issuer": f.user.did} {
				if got, _ := res.repl.GetString(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}

	t.Run("MCP server's own session id", func(t *testing.T) {
		r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
		r.Header.Set(handshake.HeaderMcpSessionID, "3b1f8c0e-a7a4-4d0c-9d4b-0f2b7c1d9e55")
		res := serve(t, h, r)
		if res.called || res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != "" {
			t.Fatalf("foreign session id: called=%t %d %s", res.called, res.rec.Code, res.rec.Body)
		}
	})
	t.Run("MCP session id and credential", func(t *testing.T) {
		r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
		r.Header.Set(handshake.HeaderMcpSessionID, "3b1f8c0e")
		r.Header.Set("Authorization", "Bearer "+cred)
		res := serve(t, h, r)
		if !res.called || res.fwd.Header.Get(handshake.HeaderMcpSessionID) != "3b1f8c0e" {
			t.Fatalf("called=%t, Mcp-Session-Id %q", res.called, res.fwd.Header.Get(handshake.HeaderMcpSessionID))
		}
	})

	tampered := vr.SessionID[:len(vr.SessionID)-3] + "AAA"
	if tampered == vr.SessionID {
		tampered = vr.SessionID[:len(vr.SessionID)-3] + "BBB"
	}
	for _, tc := range []struct {
		name, hdr, value, reason string
		called                   bool
	}{
		{"tampered handshake session", handshake.HeaderSession, tampered, "bad_signature", false},
		{"garbage handshake session", handshake.HeaderSession, "nope", "malformed", false},
		// Not provably ours: left to the MCP server, and no credential.
		{"tampered Mcp-Session-Id", handshake.HeaderMcpSessionID, tampered, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Set(tc.hdr, tc.value)
			res := serve(t, h, r)
			if res.called || res.rec.Code != http.StatusUnauthorized {
				t.Fatalf("called=%t %d", res.called, res.rec.Code)
			}
			if got := decodeErr(t, res.rec).Reason; got != tc.reason {
				t.Errorf("reason %q, want %q", got, tc.reason)
			}
		})
	}

	t.Run("expired session", func(t *testing.T) {
		real := h.l3.Sessions()
		h.l3.UseSessions(real.WithClock(func() time.Time { return time.Now().Add(16 * time.Minute) }))
		defer func() { h.l3.UseSessions(real) }()
		for _, hdr := range []string{handshake.HeaderSession, handshake.HeaderMcpSessionID} {
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Set(hdr, vr.SessionID)
			res := serve(t, h, r)
			if res.called || res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != "expired" {
				t.Fatalf("%s: called=%t %d %s", hdr, res.called, res.rec.Code, res.rec.Body)
			}
		}
	})

	t.Run("another edge's session", func(t *testing.T) {
		other := f.l3Handler(t, nil) // its own random key
		r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
		r.Header.Set(handshake.HeaderSession, vr.SessionID)
		if res := serve(t, other, r); res.called || res.rec.Code != http.StatusUnauthorized {
			t.Fatalf("called=%t %d", res.called, res.rec.Code)
		}
	})

	t.Run("route checks apply to sessions", func(t *testing.T) {
		strict := f.l3Handler(t, func(c *setup) { c.RequiredScopes = []string{"admin"} })
		strict.l3.UseSessions(h.l3.Sessions()) // same edge (key), stricter route
		r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
		r.Header.Set(handshake.HeaderSession, vr.SessionID)
		res := serve(t, strict, r)
		if res.called || res.rec.Code != http.StatusForbidden {
			t.Fatalf("missing scope: called=%t %d", res.called, res.rec.Code)
		}
		other := f.l3Handler(t, func(c *setup) { c.Audiences = []string{"https://elsewhere.example"} })
		other.l3.UseSessions(h.l3.Sessions())
		res = serve(t, other, r.Clone(context.Background()))
		if res.called || res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != "wrong_audience" {
			t.Fatalf("wrong audience: called=%t %d %s", res.called, res.rec.Code, res.rec.Body)
		}
	})
}

// TestSessionNeverOutlivesCredential: a session ends when its credential
// stops being accepted: its expiry plus the route's clock skew, the one
// rule the verifier and the Level 2 signer apply too.
func TestSessionNeverOutlivesCredential(t *testing.T) {
	f := newFixture(t)
	h := f.l3Handler(t, func(c *setup) { c.SessionTTL = Duration(time.Hour) })
	exp := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	cred := f.jwt(t, func(tm *vc.Template) { tm.ExpiresAt = exp })
	sc := answer(t, f.agent, doHandshake(t, h, defaultHandshakePath, f.agent, nil))
	rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(1, sc, cred), nil)
	var vr challenge.VerifyResult
	if err := json.Unmarshal(rep.Result, &vr); err != nil || vr.SessionID == "" {
		t.Fatalf("verify: %s", rep.Raw)
	}
	accepted := exp.Add(time.Duration(h.cfg.ClockSkew))
	if !vr.ExpiresAt.Equal(accepted) {
		t.Errorf("session expires %v, want the credential's acceptance end %v", vr.ExpiresAt, accepted)
	}
	claims, err := h.l3.Sessions().Parse(vr.SessionID)
	if err != nil || !time.Unix(claims.ExpiresAt, 0).Equal(accepted) {
		t.Errorf("token exp %v, %v", claims, err)
	}
}

func TestHandshakeErrors(t *testing.T) {
	f := newFixture(t)
	h := f.l3Handler(t, nil)
	cred := f.jwt(t, nil)
	stranger := newParty(t)
	untrusted, err := vc.IssueJWT(stranger.priv, stranger.kid, f.template(nil))
	if err != nil {
		t.Fatal(err)
	}
	otherAgent := f.jwt(t, func(tm *vc.Template) { tm.AgentDID = stranger.did })

	t.Run("replay", func(t *testing.T) {
		sc := answer(t, f.agent, doHandshake(t, h, defaultHandshakePath, f.agent, nil))
		if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(1, sc, cred), nil); rep.Error != nil {
			t.Fatalf("first answer: %s", rep.Raw)
		}
		rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, sc, cred), nil)
		if rep.Status != http.StatusOK || rep.code() != challenge.CodeReplay || rep.Next {
			t.Fatalf("replay: HTTP %d %s", rep.Status, rep.Raw)
		}
		if rep.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control %q", rep.Header.Get("Cache-Control"))
		}
	})

	t.Run("bad proof does not burn the challenge", func(t *testing.T) {
		hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
		// Signed by someone else, claiming to be the agent.
		forged, err := challenge.SignChallenge(stranger.priv, challenge.SignedChallenge{
			Challenge: hr.Challenge, Nonce: hr.Nonce, AgentDID: f.agent.did, Timestamp: challenge.TimestampRFC3339(time.Now())})
		if err != nil {
			t.Fatal(err)
		}
		if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(1, forged, cred), nil); rep.code() != challenge.CodeBadProof {
			t.Fatalf("forged proof: %s", rep.Raw)
		}
		tampered := answer(t, f.agent, hr)
		tampered.Challenge += "x"
		if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, tampered, cred), nil); rep.code() != challenge.CodeBadProof {
			t.Fatalf("tampered challenge: %s", rep.Raw)
		}
		if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(3, answer(t, f.agent, hr), cred), nil); rep.Error != nil {
			t.Fatalf("the real answer after bad ones: %s", rep.Raw)
		}
	})

	cases := []struct {
		name string
		msg  func() map[string]any
		code int
	}{
		{"unknown nonce", func() map[string]any {
			hr := challenge.HandshakeResult{Challenge: "c", Nonce: "never-issued"}
			return verifyMsg(1, answer(t, f.agent, hr), cred)
		}, challenge.CodeReplay},
		{"stale timestamp", func() map[string]any {
			hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
			sc, _ := challenge.SignChallenge(f.agent.priv, challenge.SignedChallenge{Challenge: hr.Challenge, Nonce: hr.Nonce,
				AgentDID: f.agent.did, Timestamp: challenge.TimestampRFC3339(time.Now().Add(-10 * time.Minute))})
			return verifyMsg(1, sc, cred)
		}, challenge.CodeExpired},
		{"challenge issued to another agent", func() map[string]any {
			hr := doHandshake(t, h, defaultHandshakePath, stranger, nil)
			return verifyMsg(1, answer(t, f.agent, hr), cred)
		}, challenge.CodeBadProof},
		{"untrusted issuer", func() map[string]any {
			return verifyMsg(1, answer(t, f.agent, doHandshake(t, h, defaultHandshakePath, f.agent, nil)), untrusted)
		}, challenge.CodeUntrustedCredential},
		{"credential of another agent", func() map[string]any {
			return verifyMsg(1, answer(t, f.agent, doHandshake(t, h, defaultHandshakePath, f.agent, nil)), otherAgent)
		}, challenge.CodeUntrustedCredential},
		{"no credential", func() map[string]any {
			m := verifyMsg(1, answer(t, f.agent, doHandshake(t, h, defaultHandshakePath, f.agent, nil)), nil)
			delete(m["params"].(map[string]any), "credential")
			return m
		}, challenge.CodeInvalidParams},
		{"handshake without agentDid", func() map[string]any {
			return map[string]any{"jsonrpc": "2.0", "id": 1, "method": "handshake", "params": map[string]any{"version": "1.0", "agentDid": "alice"}}
		}, challenge.CodeInvalidParams},
		{"no method in common", func() map[string]any {
			m := handshakeMsg(1, f.agent.did)
			m["params"].(map[string]any)["supportedMethods"] = []string{"RSA"}
			return m
		}, challenge.CodeInvalidParams},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := rpcCall(t, h, defaultVerifyPath, tc.msg(), nil)
			if rep.Status != http.StatusOK || rep.code() != tc.code || rep.Next {
				t.Fatalf("HTTP %d next=%t %s, want code %d", rep.Status, rep.Next, rep.Raw, tc.code)
			}
		})
	}

	// Member names that repeat or fold together (encoding/json matches
	// "Credential" and "paramſ"): refused as invalid params, and the
	// challenge is not spent.
	t.Run("ambiguous member names", func(t *testing.T) {
		hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
		sc, _ := json.Marshal(answer(t, f.agent, hr))
		for name, params := range map[string]string{
			"credential and Credential": fmt.Sprintf(`{"signedChallenge":%s,"credential":%q,"Credential":%q}`, sc, cred, untrusted),
			"credential twice":          fmt.Sprintf(`{"signedChallenge":%s,"credential":%q,"credential":%q}`, sc, cred, untrusted),
			"lone CREDENTIAL":           fmt.Sprintf(`{"signedChallenge":%s,"CREDENTIAL":%q}`, sc, cred),
			"signedChallenge folded":    fmt.Sprintf(`{"signedChallenge":%s,"ſignedChallenge":%s,"credential":%q}`, sc, sc, cred),
			"nonce twice in the answer": fmt.Sprintf(`{"signedChallenge":%s,"credential":%q}`, strings.Replace(string(sc), `"nonce":`, `"nonce":"other","nonce":`, 1), cred),
		} {
			t.Run(name, func(t *testing.T) {
				body := `{"jsonrpc":"2.0","id":5,"method":"verify","params":` + params + `}`
				rec, called := l3Serve(t, h, newRequest(http.MethodPost, defaultVerifyPath, body), nil)
				var rep rpcReply
				_ = json.Unmarshal(rec.Body.Bytes(), &rep)
				if called || rec.Code != http.StatusOK || rep.code() != challenge.CodeInvalidParams || string(rep.ID) != "5" {
					t.Fatalf("called=%t HTTP %d %s, want -32602", called, rec.Code, rec.Body)
				}
			})
		}
		if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(6, answer(t, f.agent, hr), cred), nil); rep.Error != nil {
			t.Fatalf("the agent's own answer afterwards: %s", rep.Raw)
		}
	})

	// A presentation's replay record is no challenge: a verify naming it,
	// validly signed, neither reads nor deletes it (which would let the
	// presentation be used again).
	t.Run("replay record as nonce", func(t *testing.T) {
		const id = admit.ReplayKeyPrefix + "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
		guard := admit.ReplayGuard(h.nonces)
		if err := guard.Consume(context.Background(), id, time.Minute); err != nil {
			t.Fatal(err)
		}
		sc := answer(t, f.agent, challenge.HandshakeResult{Challenge: "c2VlZA", Nonce: id})
		rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(1, sc, cred), nil)
		if rep.Status != http.StatusOK || rep.code() != challenge.CodeReplay || rep.Next {
			t.Fatalf("HTTP %d %s, want -32003", rep.Status, rep.Raw)
		}
		if err := guard.Consume(context.Background(), id, time.Minute); !errors.Is(err, challenge.ErrNonceExists) {
			t.Fatalf("replay record gone after the verify: %v", err)
		}
	})

	// Not a handshake call: the paths are not a way around Level 1.
	for name, body := range map[string]string{
		"method twice":   `{"jsonrpc":"2.0","id":1,"method":"verify","method":"handshake","params":{"agentDid":"` + f.agent.did + `"}}`,
		"Params variant": `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"` + f.agent.did + `"},"Params":{}}`,
		"other method":   `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		"batch":          `[{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"` + f.agent.did + `"}}]`,
		"not JSON":       `handshake please`,
		"notification":   `{"jsonrpc":"2.0","method":"handshake","params":{"agentDid":"` + f.agent.did + `"}}`,
		"legacy (KYA)":   `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"nonce":"n","audience":"a","timestamp":1,"agentDid":"` + f.agent.did + `"}}`,
		"GET verify":     "",
		"method casing":  `{"jsonrpc":"2.0","id":1,"method":"Handshake","params":{"agentDid":"` + f.agent.did + `"}}`,
	} {
		t.Run("falls through: "+name, func(t *testing.T) {
			method := http.MethodPost
			if body == "" {
				method = http.MethodGet
			}
			rec, called := l3Serve(t, h, newRequest(method, defaultVerifyPath, body), nil)
			want := http.StatusUnauthorized
			switch {
			case method == http.MethodGet:
				want = http.StatusMethodNotAllowed
			case name == "not JSON":
				want = http.StatusBadRequest // a JSON-typed body that is not JSON
			}
			if called || rec.Code != want {
				t.Fatalf("called=%t HTTP %d %s, want %d", called, rec.Code, rec.Body, want)
			}
		})
	}
}

func TestHandshakeStoreUnavailable(t *testing.T) {
	f := newFixture(t)
	redis := redistest.Start(t)
	h := f.l3Handler(t, useStore(redisStore(t, redis.Addr(), 300*time.Millisecond), "redis"))
	cred := f.jwt(t, nil)

	// A handshake needs no store: its challenge is a MAC, so an agent gets
	// one while Redis is down; answering it needs the store (the answer is
	// single-use) and is refused with 503 until Redis is back.
	redis.Stop()
	hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
	rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(8, answer(t, f.agent, hr), cred), nil)
	if rep.Status != http.StatusServiceUnavailable || rep.code() != challenge.CodeStoreUnavailable || string(rep.ID) != "8" {
		t.Fatalf("verify with Redis down: HTTP %d %s", rep.Status, rep.Raw)
	}

	// Back on the same port, empty (no persistence): the challenge issued
	// while it was down is answered, once.
	redis.Restart()
	sc := answer(t, f.agent, hr)
	if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(9, sc, cred), nil); rep.Error != nil {
		t.Fatalf("after Redis came back: %s", rep.Raw)
	}
	if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(10, sc, cred), nil); rep.code() != challenge.CodeReplay {
		t.Fatalf("second answer after Redis came back: %s", rep.Raw)
	}
}

func TestReloadKeepsChallenges(t *testing.T) {
	f := newFixture(t)
	// A reload: the new config is built with the host's store and storage,
	// then the old one is closed, which must leave the store it did not
	// make alone. The challenge is checked with the key derived from the
	// storage's, which the reload keeps.
	store := challenge.NewMemoryStore(bareContext(t))
	st := fileStorage(t)
	shared := func(c *setup) { useStore(store, "memory")(c); c.use(WithKeyStorage(st)) }
	old := f.l3Handler(t, shared)
	hr := doHandshake(t, old, defaultHandshakePath, f.agent, nil)
	cur := f.l3Handler(t, shared)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	sc := answer(t, f.agent, hr)
	if rep := rpcCall(t, cur, defaultVerifyPath, verifyMsg(1, sc, f.jwt(t, nil)), nil); rep.Error != nil {
		t.Fatalf("challenge of the previous config: %s", rep.Raw)
	}
	if rep := rpcCall(t, cur, defaultVerifyPath, verifyMsg(2, sc, f.jwt(t, nil)), nil); rep.code() != challenge.CodeReplay {
		t.Fatalf("second answer: %s", rep.Raw)
	}
}

func TestLegacyForms(t *testing.T) {
	f := newFixture(t)
	verifying := f.l3Handler(t, nil)
	passing := f.l3Handler(t, func(c *setup) { c.LegacyHandshake = LegacyPass })
	cred := f.jwt(t, nil)

	legacy := map[string]string{
		"KYA handshake":    `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"nonce":"n0nce","audience":"mcp.example.com","timestamp":1718476245,"agentDid":"` + f.agent.did + `","clientInfo":{"name":"kya"}}}`,
		"_mcpi_handshake":  `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"_mcpi_handshake","arguments":{"nonce":"n"}}}`,
		"_kyaos_handshake": `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"_kyaos_handshake","arguments":{}}}`,
		"_mcpi":            "{ \"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"tools/call\",\n \"params\": {\"name\": \"_mcpi\", \"arguments\": {\"x\": 1.50}} }",
	}
	for name, body := range legacy {
		for _, path := range []string{"/mcp", defaultHandshakePath} {
			t.Run(name+" "+path, func(t *testing.T) {
				// Default: like any request, it needs a credential...
				res := serve(t, verifying, newRequest(http.MethodPost, path, body))
				if res.called || res.rec.Code != http.StatusUnauthorized {
					t.Fatalf("verify mode without credential: called=%t %d", res.called, res.rec.Code)
				}
				r := newRequest(http.MethodPost, path, body)
				r.Header.Set("KYA-Delegation", cred)
				res = serve(t, verifying, r)
				if !res.called || string(res.fwdBody) != body {
					t.Fatalf("verify mode with credential: called=%t body %q", res.called, res.fwdBody)
				}
				// ...and with `legacy_handshake pass` it needs none, and goes
				// through byte for byte, with no identity.
				res = serve(t, passing, newRequest(http.MethodPost, path, body))
				if !res.called || string(res.fwdBody) != body || res.fwd.URL.Path != path {
					t.Fatalf("pass mode: called=%t %d body %q", res.called, res.rec.Code, res.fwdBody)
				}
				if v, _ := res.repl.GetString("mcpi.agent_did"); v != "" {
					t.Errorf("identity set for an unverified legacy handshake: %q", v)
				}
				// A credential presented anyway is verified and removed.
				r = newRequest(http.MethodPost, path, body)
				r.Header.Set("KYA-Delegation", cred)
				res = serve(t, passing, r)
				if !res.called || res.fwd.Header.Get("Kya-Delegation") != "" {
					t.Fatalf("pass mode with credential: called=%t", res.called)
				}
				if v, _ := res.repl.GetString("mcpi.agent_did"); v != f.agent.did {
					t.Errorf("agent %q", v)
				}
			})
		}
	}

	// Not legacy: pass mode must not let these through without a credential.
	for name, body := range map[string]string{
		"other tool":            `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`,
		"tool name twice":       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","Name":"_mcpi"}}`,
		"method twice":          `{"jsonrpc":"2.0","id":1,"method":"tools/list","METHOD":"tools/call","params":{"name":"_mcpi"}}`,
		"batch":                 `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"}}]`,
		"MCP-I handshake":       `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"agentDid":"` + f.agent.did + `","version":"1.0","nonce":"x"}}`,
		"credential in body":    bodyWith(t, "delegationToken", "garbage", false),
		"params not an object":  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["_mcpi"]}`,
		"legacy with bad token": `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi","delegationToken":"garbage"}}`,
		// encoding/json folds U+017F to s and U+212A (Kelvin) to k.
		"params folded (U+017F)":       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"},"paramſ":{"name":"echo"}}`,
		"lone folded params":           `{"jsonrpc":"2.0","id":1,"method":"tools/call","paramſ":{"name":"_mcpi"}}`,
		"other member folded (Kelvin)": `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"},"\u212aey":1,"key":2}`,
		"name twice, mixed case":       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi","nAmE":"echo"}}`,
		"id folded (dotless i)":        `{"jsonrpc":"2.0","id":1,"\u0131d":2,"method":"tools/call","params":{"name":"_mcpi"}}`,
		"params repeated exactly":      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"},"params":{"name":"echo"}}`,
		"id repeated":                  `{"jsonrpc":"2.0","id":1,"ID":2,"method":"tools/call","params":{"name":"_mcpi"}}`,
		"KYA handshake, Version":       `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"nonce":"n","agentDid":"` + f.agent.did + `","Version":"1.0"}}`,
		"KYA handshake, nonce twice":   `{"jsonrpc":"2.0","id":1,"method":"handshake","params":{"nonce":"n","nonce":"m","agentDid":"` + f.agent.did + `"}}`,
		"arguments folded next to one": `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi","arguments":{},"ARGUMENTS":{}}}`,
	} {
		t.Run("not passed: "+name, func(t *testing.T) {
			res := serve(t, passing, newRequest(http.MethodPost, "/mcp", body))
			if res.called {
				t.Fatalf("forwarded without a credential: %s", body)
			}
		})
	}
}

func TestMCPIDocument(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name   string
		mod    func(*setup)
		hs, vf string
	}{
		{"terminate", nil, defaultHandshakePath, defaultVerifyPath},
		{"proxy, own paths", func(c *setup) {
			c.Handshake, c.HandshakePath, c.VerifyPath = HandshakeProxy, "/hs", "/vf"
			c.HandshakeEndpoint = "/upstream/rpc"
		}, "/hs", "/vf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := f.l3Handler(t, tc.mod)
			rec, called := l3Serve(t, h, newRequest(http.MethodGet, wellknown.WellKnownMCPI, ""), nil)
			if called || rec.Code != http.StatusOK {
				t.Fatalf("called=%t %d", called, rec.Code)
			}
			var doc handshake.Document
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.MCPI.Version != "2.0.0" || doc.MCPI.Endpoints["handshake"] != tc.hs || doc.MCPI.Endpoints["verify"] != tc.vf ||
				len(doc.MCPI.SupportedMethods) != 3 {
				t.Errorf("document %s", rec.Body)
			}
		})
	}
	// Below level 3 the document is the upstream's business.
	h := f.handler(t, nil)
	if _, called := l3Serve(t, h, newRequest(http.MethodGet, wellknown.WellKnownMCPI, ""), nil); called {
		t.Error("level 1 answered mcp-i.json without a credential")
	}
}

func TestCustomPathsAndMethods(t *testing.T) {
	f := newFixture(t)
	h := f.l3Handler(t, func(c *setup) {
		c.HandshakePath, c.VerifyPath = "/mcpi/hs", "/mcpi/vf"
		c.HandshakeMethod, c.VerifyMethod = "mcpi/handshake", "mcpi/verify"
	})
	msg := handshakeMsg(1, f.agent.did)
	msg["method"] = "mcpi/handshake"
	rep := rpcCall(t, h, "/mcpi/hs", msg, nil)
	var hr challenge.HandshakeResult
	if err := json.Unmarshal(rep.Result, &hr); err != nil || hr.Nonce == "" {
		t.Fatalf("handshake: %s", rep.Raw)
	}
	v := verifyMsg(2, answer(t, f.agent, hr), f.jwt(t, nil))
	v["method"] = "mcpi/verify"
	if rep := rpcCall(t, h, "/mcpi/vf", v, nil); rep.Error != nil || rep.Next {
		t.Fatalf("verify: %s", rep.Raw)
	}
	// The default names and paths are nothing special any more.
	if rep := rpcCall(t, h, "/mcpi/hs", handshakeMsg(3, f.agent.did), nil); rep.Status != http.StatusUnauthorized || rep.Next {
		t.Errorf("default method on the custom path: HTTP %d", rep.Status)
	}
	if rep := rpcCall(t, h, defaultHandshakePath, msg, nil); rep.Status != http.StatusUnauthorized || rep.Next {
		t.Errorf("the default path: HTTP %d", rep.Status)
	}
}

// TestSessionForCredentialWithinSkew: a credential past its expiry but
// within the clock skew verifies, so its handshake opens a session (it
// used to fail with "credential expires now" while Level 1 admitted it).
func TestSessionForCredentialWithinSkew(t *testing.T) {
	f := newFixture(t)
	h := f.l3Handler(t, nil)
	exp := time.Now().Add(-5 * time.Second).Truncate(time.Second)
	cred := f.jwt(t, func(tm *vc.Template) {
		tm.NotBefore = exp.Add(-time.Hour)
		tm.ExpiresAt = exp
	})
	sc := answer(t, f.agent, doHandshake(t, h, defaultHandshakePath, f.agent, nil))
	rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(1, sc, cred), nil)
	var vr challenge.VerifyResult
	if err := json.Unmarshal(rep.Result, &vr); err != nil || vr.SessionID == "" {
		t.Fatalf("verify of a credential within the skew: %s", rep.Raw)
	}
	if want := exp.Add(time.Duration(h.cfg.ClockSkew)); !vr.ExpiresAt.Equal(want) {
		t.Errorf("session expires %v, want %v", vr.ExpiresAt, want)
	}
}

// TestHandshakePathTakesPOST: anything but a POST on a handshake path is
// answered 405 in terminate mode, with its headers and body, and never
// reaches the upstream.
func TestHandshakePathTakesPOST(t *testing.T) {
	h := newFixture(t).l3Handler(t, nil)
	for _, path := range []string{defaultHandshakePath, defaultVerifyPath} {
		rec, called := l3Serve(t, h, newRequest(http.MethodGet, path, ""), nil)
		hdr := rec.Header()
		if called || rec.Code != http.StatusMethodNotAllowed || hdr.Get("Allow") != http.MethodPost ||
			hdr.Get("Content-Type") != "application/json" || hdr.Get("X-Content-Type-Options") != "nosniff" ||
			hdr.Get("Cache-Control") != "no-store" ||
			rec.Body.String() != `{"error":"method_not_allowed","error_description":"handshake endpoints take JSON-RPC over POST"}` {
			t.Errorf("GET %s: called=%t HTTP %d %v %s", path, called, rec.Code, hdr, rec.Body)
		}
	}
}
