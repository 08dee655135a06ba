package edge

// Attacks through spellings an upstream reads differently from the edge
// (case-folded carrier keys, the forms of a proxied verify answer) and
// proxy sessions across routes: the edge refuses them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestFoldedCarrierKeys: encoding/json matches "delegationToKen"
// (U+212A KELVIN SIGN) and "_MCPI_DELEGATION" to the carrier fields, so a
// Go upstream would read them; the edge reads and removes them too, in
// raw UTF-8 and escaped, and a second, different credential under such a
// key is a conflict.
func TestFoldedCarrierKeys(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	good := f.jwt(t, nil)
	other := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"admin:all"} })
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` + params + `}}`
	}
	for name, body := range map[string]string{
		"Kelvin raw":            call(`"delegationTo` + "\u212a" + `en":"` + good + `"`),
		"Kelvin escaped":        call(`"delegationTo\u212aen":"` + good + `"`),
		"escaped underscore":    call(`"arguments":{"\u005fmcpi_delegation":"` + good + `"}`),
		"both carriers, folded": call(`"DELEGATIONTOKEN":"` + good + `","arguments":{"_Mcpi_Delegation":"` + good + `"}`),
	} {
		t.Run(name, func(t *testing.T) {
			res := serve(t, h, newRequest(http.MethodPost, "/mcp", body))
			if !res.called {
				t.Fatalf("not admitted: HTTP %d %s", res.rec.Code, res.rec.Body)
			}
			if bytes.Contains(res.fwdBody, []byte(good)) || !json.Valid(res.fwdBody) {
				t.Fatalf("carrier forwarded or body broken: %s", res.fwdBody)
			}
		})
	}
	r := newRequest(http.MethodPost, "/mcp", call(`"delegationToken":"`+good+`","delegationTo\u212aen":"`+other+`"`))
	if res := serve(t, h, r); res.called || res.rec.Code != http.StatusBadRequest {
		t.Fatalf("Kelvin-keyed second credential: called=%t HTTP %d, want 400", res.called, res.rec.Code)
	}
}

// TestProxyVerifyAnswerForms: the edge binds an upstream session
// only from a plain JSON verify answer it can read. An SSE answer, a
// second JSON value after the first, or a session id hidden in a
// case-variant member binds nothing, and presenting that id then admits
// nothing (the edge fails closed rather than guess).
func TestProxyVerifyAnswerForms(t *testing.T) {
	f := newFixture(t)
	e := newProxySessionEnv(t, f, nil)
	cred := f.jwt(t, nil)
	for i, tc := range []struct{ name, body string }{
		{"SSE", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"verified\":true,\"sessionId\":%q}}\n\n"},
		{"two values", `{"jsonrpc":"2.0","id":%s,"result":{"verified":false}}{"jsonrpc":"2.0","id":2,"result":{"verified":true,"sessionId":%q}}`},
		{"verified in a string", `{"jsonrpc":"2.0","id":%s,"result":{"verified":"true","sessionId":%q}}`},
		{"session id with a space", `{"jsonrpc":"2.0","id":%s,"result":{"verified":true,"sessionId":"%s x"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sid := fmt.Sprintf("answer-form-session-%02d", i)
			rt2RawVerify(t, e, cred, func(id json.RawMessage) (int, string) {
				return http.StatusOK, fmt.Sprintf(tc.body, id, sid)
			})
			if c := e.bound(t, sid); c != nil {
				t.Fatalf("bound from a %s answer", tc.name)
			}
			if res := serve(t, e.h, withSession(handshake.HeaderMcpSessionID, sid)); res.called {
				t.Fatal("admitted on an unbound session id")
			}
		})
	}
}

// rt2RawVerify is e.verify without decoding the edge's answer.
func rt2RawVerify(t *testing.T, e *proxySessionEnv, cred string, va verifyAnswer) {
	t.Helper()
	e.answer = va
	hr := doHandshake(t, e.h, defaultHandshakePath, e.f.agent, e.next)
	body, err := json.Marshal(verifyMsg(2, answer(t, e.f.agent, hr), cred))
	if err != nil {
		t.Fatal(err)
	}
	l3Serve(t, e.h, newRequest(http.MethodPost, defaultVerifyPath, string(body)), e.next)
	e.up.drain()
}

// TestProxySessionNotAcrossPolicies: a binding made on one route
// is not found by a route with another acceptance policy sharing the same
// store (a narrower audience here), nor under a case variant of the id.
func TestProxySessionNotAcrossPolicies(t *testing.T) {
	f := newFixture(t)
	e := newProxySessionEnv(t, f, nil)
	const sid = "Cross-Policy-Session-0001"
	if rep := e.verify(t, f.jwt(t, nil), sessionAnswer(sid, "")); rep.Error != nil {
		t.Fatalf("verify: %s", rep.Raw)
	}
	if res := serve(t, e.h, withSession(handshake.HeaderMcpSessionID, sid)); !res.called {
		t.Fatalf("bound session not admitted: %d", res.rec.Code)
	}
	for _, v := range []string{strings.ToLower(sid), strings.ToUpper(sid), sid + "%00", sid + "x"} {
		if res := serve(t, e.h, withSession(handshake.HeaderMcpSessionID, v)); res.called {
			t.Errorf("variant %q of a bound id admitted", v)
		}
	}
	other := newProxySessionEnv(t, f, func(c *setup) { c.Audiences = []string{"https://" + testHost} })
	other.h.l3.UseBindings(handshake.NewBindings(e.h.l3.Bindings().Binder(), other.h.cfg.acceptancePolicy(), time.Duration(other.h.cfg.SessionTTL))) // one store
	if other.h.cfg.acceptancePolicy() == e.h.cfg.acceptancePolicy() {
		t.Fatal("test setup: same policy")
	}
	if res := serve(t, other.h, withSession(handshake.HeaderMcpSessionID, sid)); res.called {
		t.Fatal("a binding made under another acceptance policy admitted")
	}
}
