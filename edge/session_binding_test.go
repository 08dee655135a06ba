package edge

import (
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestSessionFingerprintOmitsAcceptanceRules: acceptancePolicy
// (level3_config.go) names the session key and the proxy-mode binding key, but
// leaves out settings that decide whether a credential is accepted:
// clock_skew (a credential whose nbf is hours ahead), status_stale_if_error
// (a credential whose status cannot be checked), allow_private_did_web (an
// issuer resolvable only on a private network) and chain_fetch (a chain
// whose parent was never presented). A session (or proxy binding) opened on
// the lenient route is accepted on the strict one, which would have refused
// the credential itself.
func TestSessionFingerprintOmitsAcceptanceRules(t *testing.T) {
	f := newFixture(t)
	base := func(c *setup) { c.Level = 3 }
	strict := f.handler(t, base).cfg.acceptancePolicy()
	for name, mod := range map[string]func(*setup){
		"clock_skew 24h":           func(c *setup) { c.ClockSkew = Duration(24 * time.Hour) },
		"status_stale_if_error 1h": func(c *setup) { c.StatusStaleIfError = Duration(time.Hour) },
		"allow_private_did_web":    func(c *setup) { c.AllowPrivateDIDWeb = true },
		"chain_fetch":              func(c *setup) { c.ChainFetch = &ChainFetchConfig{Allow: []string{"https://creds.example.com/"}} },
	} {
		t.Run(name, func(t *testing.T) {
			lenient := f.handler(t, func(c *setup) { base(c); mod(c) }).cfg.acceptancePolicy()
			if lenient == strict {
				t.Errorf("a route with %s derives the same session key and binding key as the strict route: its sessions are accepted there", name)
			}
		})
	}
}

// TestPresentationNonceDeletesBinding: in Redis, nonce records live
// under <prefix><nonce> and proxy-mode bindings under
// <prefix>sess:<bindingKey>. nonceBinding.consume (delegation.go) refuses
// nonces that name a replay record ("vp:"), but not ones that name a
// binding: a presentation whose nonce is "sess:"+bindingKey(policy, id)
// is peeked (the binding decodes to an empty challenge.Record: no agent,
// so no agent mismatch) and then consumed with GETDEL, which deletes the
// binding before the record is found expired. Whoever knows a session id
// (and the route's policy fingerprint, a hash of its config) can end that
// session for everyone holding it. The verify path must keep to its own
// key space: refuse nonces starting with the binding prefix, or store
// nonces under a prefix of their own.
func TestPresentationNonceDeletesBinding(t *testing.T) {
	f := newFixture(t)
	redis := redistest.Start(t)
	e := newProxySessionEnv(t, f, useStore(redisStore(t, redis.Addr(), 0), "redis"))
	cred := f.jwt(t, nil)
	const sid = "5f0e7a0c-2b1d-4c11-9e55-0d9f3c2a7b61"
	if rep := e.verify(t, cred, sessionAnswer(sid, "")); rep.Error != nil {
		t.Fatalf("verify: %s", rep.Raw)
	}
	if e.bound(t, sid) == nil {
		t.Fatal("test setup: not bound")
	}
	nonce := "sess:" + handshake.BindingKey(e.h.cfg.acceptancePolicy(), sid)
	res := serve(t, e.h, bearer(vpOf(t, f.agent, nonce, nil, cred)))
	if res.called {
		t.Fatalf("a presentation with a binding key for nonce was admitted")
	}
	if e.bound(t, sid) == nil {
		t.Errorf("the binding of the session was deleted by a presentation nonce naming its key (HTTP %d %s)", res.rec.Code, res.rec.Body)
	}
}

// TestProxySessionIDTrimmedUnicode: proxySessionID trims the
// header with strings.TrimSpace, which also removes Unicode spaces
// (U+00A0, U+0085, U+2028: obs-text bytes net/http accepts and leaves in
// a value). The
// edge then admits "<bound id>\u00a0" as the bound session while the
// upstream gets that other id untouched ("the upstream gets its own id
// back" no longer holds: the identity headers vouch for a session the
// upstream never issued). Trim only SP and HTAB (net/http already did), or
// forward exactly the id that was looked up.
func TestProxySessionIDTrimmedUnicode(t *testing.T) {
	f := newFixture(t)
	e := newProxySessionEnv(t, f, nil)
	const sid = "Trim-Unicode-Session-0001"
	if rep := e.verify(t, f.jwt(t, nil), sessionAnswer(sid, "")); rep.Error != nil {
		t.Fatalf("verify: %s", rep.Raw)
	}
	for _, v := range []string{sid + "\u00a0", "\u0085" + sid, sid + "\u2028"} {
		res := serve(t, e.h, withSession(handshake.HeaderMcpSessionID, v))
		if res.called {
			t.Errorf("%q admitted as the session bound to %q; the upstream got Mcp-Session-Id %q", v, sid, res.fwd.Header.Get(handshake.HeaderMcpSessionID))
		}
	}
}

// TestProxySessionNotMovedToAnotherAgent: an upstream that hands the same
// session id to a second agent does not move the session: the first
// agent's binding stays, and the second gets none.
func TestProxySessionNotMovedToAnotherAgent(t *testing.T) {
	f := newFixture(t)
	e := newProxySessionEnv(t, f, nil)
	const sid = "b7c3d1e2-0f4a-4e5b-8c6d-1a2b3c4d5e6f"
	if rep := e.verify(t, f.jwt(t, nil), sessionAnswer(sid, "")); rep.Error != nil {
		t.Fatalf("first verify: %s", rep.Raw)
	}
	other := f
	other.agent = newParty(t)
	e2 := *e
	e2.f = other
	cred := other.jwt(t, func(tm *vc.Template) { tm.AgentDID = other.agent.did })
	if rep := e2.verify(t, cred, sessionAnswer(sid, "")); rep.Error != nil {
		t.Fatalf("second verify: %s", rep.Raw)
	}
	c := e.bound(t, sid)
	if c == nil || c.AgentDID != f.agent.did {
		t.Fatalf("binding %+v, want the first agent %s", c, f.agent.did)
	}
}
