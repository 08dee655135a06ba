package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// verifyAnswer is how the upstream answers a verify: HTTP status and body
// for the request id.
type verifyAnswer func(id json.RawMessage) (int, string)

// sessionAnswer is an upstream verify result opening session sid, with
// extra result members (e.g. `"expiresAt":"…"`).
func sessionAnswer(sid, extra string) verifyAnswer {
	if extra != "" {
		extra = "," + extra
	}
	return func(id json.RawMessage) (int, string) {
		return http.StatusOK, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"verified":true,"sessionId":%q,"scopes":[]%s}}`, id, sid, extra)
	}
}

// answeringVerify is up, with its verify endpoint answering *answer.
func answeringVerify(up *fakeUpstream, answer *verifyAnswer) Next {
	return Next(func(w http.ResponseWriter, r *http.Request) error {
		if r.URL.Path != up.vfPath {
			up.ServeHTTP(w, r)
			return nil
		}
		body, _ := io.ReadAll(r.Body)
		up.reqs <- recordedReq{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &req)
		status, out := (*answer)(req.ID)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream", "verify")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, out)
		return nil
	})
}

// proxySessionEnv is a proxy-mode edge in front of a fakeUpstream whose
// verify answer the test sets.
type proxySessionEnv struct {
	f      fixture
	h      *Handler
	up     *fakeUpstream
	answer verifyAnswer
	next   Next
}

func newProxySessionEnv(t *testing.T, f fixture, mod func(*setup)) *proxySessionEnv {
	e := &proxySessionEnv{f: f, up: newFakeUpstream(t, "/rpc/hs", "/rpc/vf")}
	e.next = answeringVerify(e.up, &e.answer)
	e.h = f.l3Handler(t, func(c *setup) {
		c.Handshake, c.HandshakeEndpoint, c.VerifyEndpoint = HandshakeProxy, "/rpc/hs", "/rpc/vf"
		if mod != nil {
			mod(c)
		}
	})
	return e
}

// verify runs a handshake and a verify of cred through the edge, the
// upstream answering the verify with answer.
func (e *proxySessionEnv) verify(t *testing.T, cred string, va verifyAnswer) rpcReply {
	t.Helper()
	e.answer = va
	hr := doHandshake(t, e.h, defaultHandshakePath, e.f.agent, e.next)
	rep := rpcCall(t, e.h, defaultVerifyPath, verifyMsg(2, answer(t, e.f.agent, hr), cred), e.next)
	e.up.drain()
	return rep
}

// bound returns the claims bound to sid, or nil.
func (e *proxySessionEnv) bound(t *testing.T, sid string) *handshake.Claims {
	t.Helper()
	val, err := e.h.l3.Bindings().Binder().Lookup(context.Background(), handshake.BindingKey(e.h.cfg.acceptancePolicy(), sid))
	if errors.Is(err, challenge.ErrBindingNotFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	var c handshake.Claims
	if err := json.Unmarshal(val, &c); err != nil {
		t.Fatalf("binding %s: %v", val, err)
	}
	return &c
}

// withSession is a tools/call presenting sid in hdr.
func withSession(hdr, sid string) *http.Request {
	r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set(hdr, sid)
	return r
}

func TestProxySessionBound(t *testing.T) {
	f := newFixture(t)
	core, logs := observer.New(zapcore.DebugLevel)
	e := newProxySessionEnv(t, f, func(c *setup) { c.use(WithLogger(zap.New(core))) })
	cred := f.jwt(t, nil)
	const sid = "3b1f8c0e-a7a4-4d0c-9d4b-0f2b7c1d9e55"
	exp := time.Now().Add(30 * time.Minute).UTC().Truncate(time.Second)

	va := sessionAnswer(sid, fmt.Sprintf(`"agentDid":%q,"expiresAt":%q`, f.agent.did, exp.Format(time.RFC3339)))
	rep := e.verify(t, cred, va)
	_, want := va(json.RawMessage("2"))
	if rep.Status != http.StatusOK || string(rep.Raw) != want || rep.Header.Get("X-Upstream") != "verify" {
		t.Fatalf("verify answer not the upstream's, unchanged: HTTP %d %s", rep.Status, rep.Raw)
	}
	c := e.bound(t, sid)
	if c == nil {
		t.Fatal("upstream session not bound")
	}
	if c.AgentDID != f.agent.did || c.UserDID != f.user.did || c.Issuer != f.user.did || c.RootIssuer != f.user.did ||
		strings.Join(c.Scopes, " ") != "tools:read echo:execute" || c.Hash == "" || c.CredentialID == "" {
		t.Errorf("binding %+v", c)
	}
	// session_ttl (15m) is shorter than the upstream's 30m.
	if left := time.Until(time.Unix(c.ExpiresAt, 0)); left > 15*time.Minute || left < 14*time.Minute {
		t.Errorf("binding expires in %v, want session_ttl's 15m", left)
	}
	// The key is the id's hash; the id itself is stored nowhere.
	if _, err := e.h.l3.Bindings().Binder().Lookup(context.Background(), sid); !errors.Is(err, challenge.ErrBindingNotFound) {
		t.Errorf("binding found under the raw session id: %v", err)
	}

	for _, hdr := range []string{handshake.HeaderSession, handshake.HeaderMcpSessionID} {
		t.Run("only "+hdr, func(t *testing.T) {
			res := serve(t, e.h, withSession(hdr, sid))
			if !res.called {
				t.Fatalf("not admitted: %d %s", res.rec.Code, res.rec.Body)
			}
			fwd := res.fwd.Header
			if got := fwd.Get(hdr); got != sid {
				t.Errorf("%s reached the upstream as %q, want it intact", hdr, got)
			}
			if fwd.Get("X-Agent-Did") != f.agent.did || fwd.Get("X-User-Did") != f.user.did || fwd.Get("X-Verified-Delegation") == "" {
				t.Errorf("Level 2 headers %v", fwd)
			}
			for k, v := range map[string]string{"http.auth.user.id": f.agent.did, "mcpi.user_did": f.user.did, "mcpi.scopes": "tools:read echo:execute"} {
				if got, _ := res.repl.GetString(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
	t.Run("session ends: DELETE passes", func(t *testing.T) {
		r := newRequest(http.MethodDelete, "/mcp", "")
		r.Header.Set(handshake.HeaderMcpSessionID, sid)
		res := serve(t, e.h, r)
		if !res.called || res.fwd.Method != http.MethodDelete || res.fwd.Header.Get(handshake.HeaderMcpSessionID) != sid {
			t.Fatalf("DELETE: called=%t %d", res.called, res.rec.Code)
		}
		// The edge does not learn that the session ended: the binding
		// runs out by itself.
		if e.bound(t, sid) == nil {
			t.Error("binding dropped on DELETE")
		}
	})
	t.Run("handshake session header wins", func(t *testing.T) {
		r := withSession(handshake.HeaderSession, "not-bound-0000000000")
		r.Header.Set(handshake.HeaderMcpSessionID, sid)
		if res := serve(t, e.h, r); res.called || res.rec.Code != http.StatusUnauthorized {
			t.Fatalf("called=%t %d", res.called, res.rec.Code)
		}
		r = withSession(handshake.HeaderSession, sid)
		r.Header.Add(handshake.HeaderSession, sid)
		res := serve(t, e.h, r)
		if res.called || res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != "malformed" {
			t.Fatalf("two session headers: called=%t %d %s", res.called, res.rec.Code, res.rec.Body)
		}
	})
	t.Run("require_presentation tool", func(t *testing.T) {
		strict := f.l3Handler(t, func(c *setup) {
			c.Handshake, c.HandshakeEndpoint = HandshakeProxy, "/rpc"
			c.Tools = []ToolPolicy{{Name: "echo", RequirePresentation: true}}
		})
		// Same default store (pooled): the binding is there. The agent
		// proved its key at the handshake.
		if res := serve(t, strict, withSession(handshake.HeaderMcpSessionID, sid)); !res.called {
			t.Fatalf("not admitted: %d %s", res.rec.Code, res.rec.Body)
		}
	})
	t.Run("route checks", func(t *testing.T) {
		scoped := f.l3Handler(t, func(c *setup) {
			c.Handshake, c.HandshakeEndpoint, c.RequiredScopes = HandshakeProxy, "/rpc", []string{"admin"}
		})
		if res := serve(t, scoped, withSession(handshake.HeaderMcpSessionID, sid)); res.called || res.rec.Code != http.StatusForbidden {
			t.Fatalf("missing scope: called=%t %d", res.called, res.rec.Code)
		}
		elsewhere := f.l3Handler(t, func(c *setup) {
			c.Handshake, c.HandshakeEndpoint, c.Audiences = HandshakeProxy, "/rpc", []string{"https://elsewhere.example"}
		})
		// Another acceptance policy (other audiences): the binding is not
		// found there at all, as without any session.
		res := serve(t, elsewhere, withSession(handshake.HeaderSession, sid))
		if res.called || res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != "" {
			t.Fatalf("other audiences: called=%t %d %s", res.called, res.rec.Code, res.rec.Body)
		}
		// Were it found, the audience check would refuse it.
		elsewhere.l3.UseBindings(handshake.NewBindings(elsewhere.l3.Bindings().Binder(), e.h.cfg.acceptancePolicy(), time.Duration(elsewhere.cfg.SessionTTL)))
		res = serve(t, elsewhere, withSession(handshake.HeaderSession, sid))
		if res.called || res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != "wrong_audience" {
			t.Fatalf("wrong audience: called=%t %d %s", res.called, res.rec.Code, res.rec.Body)
		}
	})

	forged := sid[:len(sid)-1] + "6"
	for _, tc := range []struct{ name, hdr, value string }{
		{"unknown handshake session", handshake.HeaderSession, "b2c8a1f0-0000-4000-8000-000000000000"},
		{"forged handshake session", handshake.HeaderSession, forged},
		{"forged Mcp-Session-Id", handshake.HeaderMcpSessionID, forged},
		{"too short to be bound", handshake.HeaderSession, "abc"},
		{"the binding key itself", handshake.HeaderSession, handshake.BindingKey(e.h.cfg.acceptancePolicy(), sid)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := serve(t, e.h, withSession(tc.hdr, tc.value))
			// As without any session: 401, no reason.
			if res.called || res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != "" {
				t.Fatalf("called=%t %d %s", res.called, res.rec.Code, res.rec.Body)
			}
		})
	}
	t.Run("MCP server's own session id", func(t *testing.T) {
		own := "0f2b7c1d9e55-own-session"
		r := withSession(handshake.HeaderMcpSessionID, own)
		r.Header.Set("Authorization", "Bearer "+cred)
		res := serve(t, e.h, r)
		if !res.called || res.fwd.Header.Get(handshake.HeaderMcpSessionID) != own {
			t.Fatalf("with a credential: called=%t, Mcp-Session-Id %q", res.called, res.fwd.Header.Get(handshake.HeaderMcpSessionID))
		}
		anon := f.l3Handler(t, func(c *setup) {
			c.Handshake, c.HandshakeEndpoint = HandshakeProxy, "/rpc"
			c.Tools = []ToolPolicy{{Name: "echo", AllowAnonymous: true}}
		})
		res = serve(t, anon, withSession(handshake.HeaderMcpSessionID, own))
		if !res.called || res.fwd.Header.Get(handshake.HeaderMcpSessionID) != own || res.fwd.Header.Get("X-Agent-Did") != "" {
			t.Fatalf("anonymous tool: called=%t %d", res.called, res.rec.Code)
		}
	})
	t.Run("expired binding", func(t *testing.T) {
		real := e.h.l3.Bindings()
		e.h.l3.UseBindings(real.WithClock(func() time.Time { return time.Now().Add(16 * time.Minute) }))
		defer func() { e.h.l3.UseBindings(real) }()
		for _, hdr := range []string{handshake.HeaderSession, handshake.HeaderMcpSessionID} {
			res := serve(t, e.h, withSession(hdr, sid))
			if res.called || res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != "expired" {
				t.Fatalf("%s: called=%t %d %s", hdr, res.called, res.rec.Code, res.rec.Body)
			}
		}
	})

	for _, entry := range logs.All() {
		line := entry.Message
		for _, fld := range entry.Context {
			line += fmt.Sprintf(" %v %s", fld.Interface, fld.String)
		}
		if strings.Contains(line, sid) {
			t.Errorf("log entry holds the session id: %s", line)
		}
	}
	if logs.FilterMessage("upstream handshake session bound").Len() != 1 {
		t.Error("binding not logged")
	}
}

// TestProxySessionExpiry: a binding never outlives the credential, nor the
// upstream's expiresAt.
// TestProxySessionRouteTrust: a binding made by a route that trusts any
// issuer, for a self-issued credential, is not found by a stricter route
// sharing the store (its acceptance policy scopes the binding key), and
// were it found, the binding's root issuer is checked against that route's
// trust list.
func TestProxySessionRouteTrust(t *testing.T) {
	f := newFixture(t)
	mallory := newParty(t)
	open := newProxySessionEnv(t, f, func(c *setup) { c.TrustedIssuers = []string{AnyIssuer} })
	cred, err := vc.IssueJWT(mallory.priv, mallory.kid, f.template(nil)) // names f.user as the user
	if err != nil {
		t.Fatal(err)
	}
	const sid = "5d0c3b1f-8c0e-4a7a-9d4b-0f2b7c1d9e55"
	if rep := open.verify(t, cred, sessionAnswer(sid, "")); rep.Status != http.StatusOK || open.bound(t, sid) == nil {
		t.Fatalf("verify on the open route: HTTP %d %s", rep.Status, rep.Raw)
	}
	if res := serve(t, open.h, withSession(handshake.HeaderSession, sid)); !res.called {
		t.Fatalf("the open route refused its own binding: HTTP %d %s", res.rec.Code, res.rec.Body)
	}
	// Same default store (pooled), trust f.user only.
	strict := f.l3Handler(t, func(c *setup) { c.Handshake, c.HandshakeEndpoint = HandshakeProxy, "/rpc" })
	res := serve(t, strict, withSession(handshake.HeaderSession, sid))
	if res.called || res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != "" {
		t.Fatalf("strict route: called=%t HTTP %d %s, want 401 as without a session", res.called, res.rec.Code, res.rec.Body)
	}
	strict.l3.UseBindings(handshake.NewBindings(strict.l3.Bindings().Binder(), open.h.cfg.acceptancePolicy(), time.Duration(strict.cfg.SessionTTL)))
	res = serve(t, strict, withSession(handshake.HeaderSession, sid))
	if res.called || res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != "untrusted_issuer" {
		t.Fatalf("strict route under the open route's key: called=%t HTTP %d %s, want 401 untrusted_issuer", res.called, res.rec.Code, res.rec.Body)
	}
}

func TestProxySessionExpiry(t *testing.T) {
	f := newFixture(t)
	e := newProxySessionEnv(t, f, func(c *setup) { c.SessionTTL = Duration(time.Hour) })

	credExp := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	cred := f.jwt(t, func(tm *vc.Template) { tm.ExpiresAt = credExp })
	const sid = "session-bounded-by-the-credential"
	e.verify(t, cred, sessionAnswer(sid, `"expiresAt":null`))
	c := e.bound(t, sid)
	accepted := credExp.Add(time.Duration(e.h.cfg.ClockSkew)) // vc.AcceptedUntil
	if c == nil || time.Unix(c.ExpiresAt, 0).After(accepted) || time.Unix(c.ExpiresAt, 0).Before(accepted.Add(-time.Second)) {
		t.Fatalf("binding %+v, want it to expire with the credential's acceptance at %v", c, accepted)
	}
	real := e.h.l3.Bindings()
	e.h.l3.UseBindings(real.WithClock(func() time.Time { return accepted.Add(time.Second) }))
	res := serve(t, e.h, withSession(handshake.HeaderMcpSessionID, sid))
	if res.called || res.rec.Code != http.StatusUnauthorized || decodeErr(t, res.rec).Reason != "expired" {
		t.Fatalf("after the credential expired: called=%t %d %s", res.called, res.rec.Code, res.rec.Body)
	}
	e.h.l3.UseBindings(real)

	upExp := time.Now().Add(5 * time.Minute).UTC().Truncate(time.Second)
	const sid2 = "session-bounded-by-the-upstream"
	e.verify(t, f.jwt(t, nil), sessionAnswer(sid2, fmt.Sprintf(`"expiresAt":%q`, upExp.Format(time.RFC3339))))
	if c := e.bound(t, sid2); c == nil || time.Unix(c.ExpiresAt, 0).After(upExp) {
		t.Fatalf("binding %+v, want it to expire with the upstream session at %v", c, upExp)
	}
}

// TestProxySessionNotBound: an upstream answer that opens no usable session
// binds nothing and is relayed unchanged.
func TestProxySessionNotBound(t *testing.T) {
	f := newFixture(t)
	e := newProxySessionEnv(t, f, nil)
	cred := f.jwt(t, nil)
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	for i, tc := range []struct {
		name   string
		status int
		result string // %s: the session id
	}{
		{"verified false", 200, `"result":{"verified":false,"sessionId":%q}`},
		{"verified missing", 200, `"result":{"sessionId":%q}`},
		{"JSON-RPC error", 200, `"error":{"code":-32002,"message":"Invalid proof","data":{"sessionId":%q}}`},
		{"HTTP error", 500, `"result":{"verified":true,"sessionId":%q}`},
		{"no session id", 200, `"result":{"verified":true,"sessionId":"","x":%q}`},
		{"session id not a string", 200, `"result":{"verified":true,"sessionId":{"id":%q}}`},
		{"another agent", 200, `"result":{"verified":true,"sessionId":%q,"agentDid":"did:key:z6Mkother"}`},
		{"bad expiresAt", 200, `"result":{"verified":true,"sessionId":%q,"expiresAt":1767225600}`},
		{"expired", 200, `"result":{"verified":true,"sessionId":%q,"expiresAt":"` + past + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sid := fmt.Sprintf("not-bound-session-%02d", i)
			var body string
			rep := e.verify(t, cred, func(id json.RawMessage) (int, string) {
				body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,`+tc.result+`}`, id, sid)
				return tc.status, body
			})
			if rep.Status != tc.status || string(rep.Raw) != body {
				t.Fatalf("not relayed unchanged: HTTP %d %s", rep.Status, rep.Raw)
			}
			if e.bound(t, sid) != nil {
				t.Fatal("bound")
			}
			if res := serve(t, e.h, withSession(handshake.HeaderMcpSessionID, sid)); res.called {
				t.Fatal("admitted on an unbound session")
			}
		})
	}
	t.Run("short session id", func(t *testing.T) {
		rep := e.verify(t, cred, sessionAnswer("42", ""))
		if rep.Error != nil || !strings.Contains(string(rep.Raw), `"sessionId":"42"`) || e.bound(t, "42") != nil {
			t.Fatalf("HTTP %d %s", rep.Status, rep.Raw)
		}
	})
	t.Run("too large to read", func(t *testing.T) {
		rep := e.verify(t, cred, sessionAnswer("too-large-session-id", `"pad":"`+strings.Repeat("a", handshake.MaxResponse)+`"`))
		if rep.Status != http.StatusOK || rep.code() != challenge.CodeInternalError || e.bound(t, "too-large-session-id") != nil {
			t.Fatalf("HTTP %d %.200s", rep.Status, rep.Raw)
		}
	})
}

// failingBinder fails as an unreachable store does.
type failingBinder struct{}

func (failingBinder) Bind(context.Context, string, []byte, time.Duration) error {
	return fmt.Errorf("%w: dial tcp: refused", challenge.ErrStoreUnavailable)
}

func (failingBinder) Lookup(context.Context, string) ([]byte, error) {
	return nil, fmt.Errorf("%w: dial tcp: refused", challenge.ErrStoreUnavailable)
}

// TestProxySessionStoreUnavailable: the edge fails closed both ways.
func TestProxySessionStoreUnavailable(t *testing.T) {
	f := newFixture(t)
	e := newProxySessionEnv(t, f, nil)
	e.h.l3.UseBindings(handshake.NewBindings(failingBinder{}, e.h.cfg.acceptancePolicy(), time.Duration(e.h.cfg.SessionTTL)))
	const sid = "session-the-store-cannot-hold"

	// The upstream opened a session the edge cannot record: the agent
	// does not get it (it could not use it).
	rep := e.verify(t, f.jwt(t, nil), sessionAnswer(sid, ""))
	if rep.Status != http.StatusServiceUnavailable || rep.code() != challenge.CodeStoreUnavailable || strings.Contains(string(rep.Raw), sid) {
		t.Fatalf("verify: HTTP %d %s", rep.Status, rep.Raw)
	}
	for _, hdr := range []string{handshake.HeaderSession, handshake.HeaderMcpSessionID} {
		res := serve(t, e.h, withSession(hdr, sid))
		if res.called || res.rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s with the store down: called=%t %d", hdr, res.called, res.rec.Code)
		}
	}
	// No session header: no lookup, the usual 401.
	if res := serve(t, e.h, newRequest(http.MethodPost, "/mcp", toolsCallBody)); res.rec.Code != http.StatusUnauthorized {
		t.Fatalf("without a session: %d", res.rec.Code)
	}
}

// TestProxySessionRedis: replicas sharing a Redis share the bindings; with
// Redis down a session request fails closed.
func TestProxySessionRedis(t *testing.T) {
	f := newFixture(t)
	redis := redistest.Start(t)
	// Two configurations, two clients: as two Caddy instances.
	a := newProxySessionEnv(t, f, useStore(redisStore(t, redis.Addr(), 300*time.Millisecond), "redis"))
	b := newProxySessionEnv(t, f, useStore(redisStore(t, redis.Addr(), 400*time.Millisecond), "redis"))
	const sid = "9d4b0f2b-7c1d-4e55-8a7a-3b1f8c0ea7a4"
	if rep := a.verify(t, f.jwt(t, nil), sessionAnswer(sid, "")); rep.Error != nil {
		t.Fatalf("verify at A: %s", rep.Raw)
	}
	res := serve(t, b.h, withSession(handshake.HeaderMcpSessionID, sid))
	if !res.called || res.fwd.Header.Get("X-Agent-Did") != f.agent.did || res.fwd.Header.Get(handshake.HeaderMcpSessionID) != sid {
		t.Fatalf("at B: called=%t %d", res.called, res.rec.Code)
	}

	redis.Stop()
	res = serve(t, b.h, withSession(handshake.HeaderMcpSessionID, sid))
	if res.called || res.rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("Redis down: called=%t %d", res.called, res.rec.Code)
	}
	redis.Restart() // empty
	// Back, empty: the session is unknown, as without any.
	eventually(t, "Redis back", func() bool {
		return serve(t, b.h, withSession(handshake.HeaderMcpSessionID, sid)).rec.Code == http.StatusUnauthorized
	})
}

// plainStore is a NonceStore that keeps no bindings.
type plainStore struct{ challenge.NonceStore }

func TestProxySessionNeedsBinder(t *testing.T) {
	var h Handler
	h.nonces = &measuredNonceStore{store: plainStore{}, name: "custom"}
	if _, err := h.sessionBinder(); err == nil || !strings.Contains(err.Error(), "custom") {
		t.Fatalf("sessionBinder = %v, want an error naming the store", err)
	}
	h.nonces = &measuredNonceStore{store: challenge.NewMemoryStore(bareContext(t)), name: "memory"}
	if _, err := h.sessionBinder(); err != nil {
		t.Fatal(err)
	}
}
