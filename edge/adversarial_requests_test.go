package edge

// Attacks tried against the handler that it refuses (or neutralises):
// folded member names, method spellings, ambiguous tool names, body forms,
// carrier tricks, algorithm confusion, forged identity headers, session
// tokens.

import (
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// rtNotForwarded fails if the request reached next.
func rtNotForwarded(t *testing.T, res polResult, what string) {
	t.Helper()
	if res.called {
		t.Fatalf("%s: forwarded (HTTP %d), body %s", what, res.rec.Code, res.fwdBody)
	}
}

// TestFoldedMemberNames: Go's encoding/json folds U+017F (long s) to
// "s" and U+212A (Kelvin) to "k" when it matches member names. On the tool
// policy path mcp.Confusable folds them too (jsonkey.Fold), so
// "paramſ" next to "params" is refused, for verified and anonymous callers.
func TestFoldedMemberNames(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	smuggle := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}},"paramſ":{"name":"files_write","arguments":{}}}`
	anon := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"public","arguments":{}},"paramſ":{"name":"files_write","arguments":{}}}`
	inParams := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","ńame":"x"}}`

	res := polServe(t, h, polPost(smuggle, tok), nil)
	rtNotForwarded(t, res, "verified paramſ")
	if res.rec.Code != http.StatusBadRequest {
		t.Errorf("verified paramſ: HTTP %d, want 400", res.rec.Code)
	}
	res = polServe(t, h, polPost(anon, ""), nil)
	rtNotForwarded(t, res, "anonymous paramſ")
	// The body is refused before the credential question: the edge
	// cannot read it unambiguously (mcp.ParseStrict).
	if res.rec.Code != http.StatusBadRequest {
		t.Errorf("anonymous paramſ: HTTP %d, want 400", res.rec.Code)
	}
	// A name no Go fold maps to "name" is just another member.
	if res := polServe(t, h, polPost(inParams, tok), nil); !res.called {
		t.Errorf("unrelated non-ASCII member refused: HTTP %d %s", res.rec.Code, res.rec.Body)
	}
}

// TestMethodSpellings: the method is compared after JSON unescaping,
// so escaped spellings of tools/call are policed; other spellings are not
// tools/call to any MCP server and not admitted anonymously.
func TestMethodSpellings(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	for _, m := range []string{`tools\/call`, `tools\u002fcall`, `\u0074ools/call`} {
		body := `{"jsonrpc":"2.0","id":1,"method":"` + m + `","params":{"name":"files_write","arguments":{}}}`
		res := polServe(t, h, polPost(body, tok), nil)
		rtNotForwarded(t, res, m)
		if msg := decodeRPC(t, res.rec.Body.Bytes()); msg.Result == nil || !msg.Result.IsError {
			t.Errorf("%s: want a tool error, got %s", m, res.rec.Body)
		}
	}
	for _, m := range []string{"Tools/Call", "tools/call ", "TOOLS/CALL", "tools/call\u0000"} {
		mj, _ := json.Marshal(m)
		body := `{"jsonrpc":"2.0","id":1,"method":` + string(mj) + `,"params":{"name":"files_write","arguments":{}}}`
		res := polServe(t, h, polPost(body, ""), nil)
		rtNotForwarded(t, res, "anonymous "+m)
		if res.rec.Code != http.StatusUnauthorized {
			t.Errorf("anonymous %q: HTTP %d", m, res.rec.Code)
		}
	}
}

// TestToolNameAmbiguity: what the edge cannot read unambiguously as
// one tool name it refuses.
func TestToolNameAmbiguity(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	for name, body := range map[string]string{
		"name twice":             `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"files_write"}}`,
		"name escaped twice":     `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","n\u0061me":"files_write"}}`,
		"Name":                   `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","NAME":"files_write"}}`,
		"name a number":          `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":1}}`,
		"name an array":          `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":["echo"]}}`,
		"no name":                `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`,
		"params an array":        `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["files_write"]}`,
		"method twice":           `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"files_write"}}`,
		"Method":                 `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"files_write"}}`,
		"params twice":           `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"params":{"name":"files_write"}}`,
		"request and response":   `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files_write"},"result":{}}`,
		"invalid UTF-8 in name":  "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\xff\"}}",
		"BOM":                    "\xef\xbb\xbf" + polCall(1, "files_write"),
		"trailing data":          polCall(1, "echo") + polCall(2, "files_write"),
		"batch in a batch":       "[[" + polCall(1, "files_write") + "]]",
		"batch element a string": `["x",` + polCall(1, "echo") + "]",
	} {
		t.Run(name, func(t *testing.T) {
			res := polServe(t, h, polPost(body, tok), nil)
			rtNotForwarded(t, res, name)
			if res.rec.Code != http.StatusBadRequest {
				t.Errorf("HTTP %d, want 400: %s", res.rec.Code, res.rec.Body)
			}
		})
	}
}

// TestPolicyBodyForms: a tool policy reads every POST body, whatever
// it claims to be; bodies it cannot parse are refused, never forwarded.
func TestPolicyBodyForms(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, func(c *setup) { c.MaxBodySize = 4096 })
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	denied := polCall(1, "files_write")

	t.Run("text/plain", func(t *testing.T) {
		r := polPost(denied, tok)
		r.Header.Set("Content-Type", "text/plain")
		rtNotForwarded(t, polServe(t, h, r, nil), "text/plain")
	})
	t.Run("no content type", func(t *testing.T) {
		r := polPost(denied, tok)
		r.Header.Del("Content-Type")
		rtNotForwarded(t, polServe(t, h, r, nil), "no content type")
	})
	t.Run("utf-16", func(t *testing.T) {
		u := utf16.Encode([]rune(denied))
		var b bytes.Buffer
		b.Write([]byte{0xff, 0xfe})
		_ = binary.Write(&b, binary.LittleEndian, u)
		r := polPost(b.String(), tok)
		r.Header.Set("Content-Type", "application/json; charset=utf-16")
		res := polServe(t, h, r, nil)
		rtNotForwarded(t, res, "utf-16")
		if res.rec.Code != http.StatusUnsupportedMediaType {
			t.Errorf("HTTP %d, want 415", res.rec.Code)
		}
	})
	t.Run("gzip", func(t *testing.T) {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = io.WriteString(zw, denied)
		_ = zw.Close()
		r := polPost(b.String(), tok)
		r.Header.Set("Content-Encoding", "gzip")
		res := polServe(t, h, r, nil)
		rtNotForwarded(t, res, "gzip")
		if res.rec.Code != http.StatusUnsupportedMediaType {
			t.Errorf("HTTP %d, want 415", res.rec.Code)
		}
	})
	t.Run("chunked over the limit", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"pad":"` + strings.Repeat("a", 8000) + `"}}}`
		r := polPost(big, tok)
		r.ContentLength = -1
		r.Body = io.NopCloser(strings.NewReader(big))
		res := polServe(t, h, r, nil)
		rtNotForwarded(t, res, "chunked")
		if res.rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("HTTP %d, want 413", res.rec.Code)
		}
	})
	t.Run("very deep arguments", func(t *testing.T) {
		deep := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"x":` +
			strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}}}`
		res := polServe(t, h, polPost(deep, tok), nil)
		rtNotForwarded(t, res, "deep")
		if res.rec.Code != http.StatusBadRequest {
			t.Errorf("HTTP %d, want 400", res.rec.Code)
		}
	})
	t.Run("batch: allowed call and denied notification", func(t *testing.T) {
		body := "[" + polCall(1, "echo") + `,{"jsonrpc":"2.0","method":"tools/call","params":{"name":"files_write"}}]`
		rtNotForwarded(t, polServe(t, h, polPost(body, tok), nil), "batch")
	})
	t.Run("anonymous batch hiding a call behind tools/list", func(t *testing.T) {
		body := `[{"jsonrpc":"2.0","id":1,"method":"tools/list"},` + polCall(2, "files_write") + "]"
		res := polServe(t, h, polPost(body, ""), nil)
		rtNotForwarded(t, res, "anonymous batch")
		if res.rec.Code != http.StatusUnauthorized {
			t.Errorf("HTTP %d, want 401", res.rec.Code)
		}
	})
}

// TestBodyCarrierTricks: every spelling of a body carrier that a JSON
// parser could read is read (and removed), and two credentials are a
// conflict, whatever the carriers.
func TestBodyCarrierTricks(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	good := f.jwt(t, nil)
	other := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"admin:all"} })
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` + params + `}}`
	}

	conflicts := map[string]*http.Request{
		"duplicate delegationToken": newRequest(http.MethodPost, "/mcp", call(`"delegationToken":"`+good+`","delegationToken":"`+other+`"`)),
		"DelegationToken case variant": newRequest(http.MethodPost, "/mcp",
			call(`"delegationToken":"`+good+`","DelegationToken":"`+other+`"`)),
		"escaped key": newRequest(http.MethodPost, "/mcp", call(`"delegationToken":"`+good+`","delegation\u0054oken":"`+other+`"`)),
		"batch elements": newRequest(http.MethodPost, "/mcp", "["+call(`"delegationToken":"`+good+`"`)+","+
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"_mcpi_delegation":"`+other+`"}}}]`),
		"header and body": func() *http.Request {
			r := newRequest(http.MethodPost, "/mcp", call(`"delegationToken":"`+other+`"`))
			r.Header.Set("Authorization", "Bearer "+good)
			return r
		}(),
		"two bearers": func() *http.Request {
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Add("Authorization", "Bearer "+good)
			r.Header.Add("Authorization", "Bearer "+other)
			return r
		}(),
		"KYA-Delegation twice": func() *http.Request {
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Add("KYA-Delegation", good)
			r.Header.Add("KYA-Delegation", other)
			return r
		}(),
	}
	for name, r := range conflicts {
		t.Run("conflict/"+name, func(t *testing.T) {
			res := serve(t, h, r)
			if res.called || res.rec.Code != http.StatusBadRequest {
				t.Fatalf("called=%t HTTP %d, want 400", res.called, res.rec.Code)
			}
		})
	}

	found := map[string]string{
		"DelegationToken":         call(`"DelegationToken":"` + good + `"`),
		"escaped delegationToken": call(`"delegation\u0054oken":"` + good + `"`),
		"_MCPI_DELEGATION":        call(`"arguments":{"_MCPI_DELEGATION":"` + good + `"}`),
		"in a batch element": `[{"jsonrpc":"2.0","id":1,"method":"ping"},` +
			`{"jsonrpc":"2.0","id":2,"method":"tools\/call","params":{"name":"echo","arguments":{"_mcpi_delegation":"` + good + `"}}}]`,
	}
	for name, body := range found {
		t.Run("read and removed/"+name, func(t *testing.T) {
			res := serve(t, h, newRequest(http.MethodPost, "/mcp", body))
			if !res.called {
				t.Fatalf("not admitted: HTTP %d %s", res.rec.Code, res.rec.Body)
			}
			if bytes.Contains(res.fwdBody, []byte(good)) || bytes.Contains(bytes.ToLower(res.fwdBody), []byte("delegation")) {
				t.Errorf("carrier forwarded: %s", res.fwdBody)
			}
			if !json.Valid(res.fwdBody) {
				t.Errorf("forwarded body not JSON: %s", res.fwdBody)
			}
		})
	}

	for name, body := range map[string]string{
		"number":  call(`"delegationToken":12345`),
		"array":   call(`"delegationToken":["` + good + `"]`),
		"garbage": call(`"delegationToken":"x.y.z"`),
	} {
		t.Run("refused/"+name, func(t *testing.T) {
			if res := serve(t, h, newRequest(http.MethodPost, "/mcp", body)); res.called || res.rec.Code != http.StatusUnauthorized {
				t.Fatalf("called=%t HTTP %d, want 401", res.called, res.rec.Code)
			}
		})
	}
}

// TestAlgorithmConfusion: alg none and HS256 keyed with the issuer's
// public key, in every header carrier, are refused.
func TestAlgorithmConfusion(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	good := f.jwt(t, nil)
	parts := strings.Split(good, ".")
	enc := base64.RawURLEncoding
	hdr := func(alg string) string {
		return enc.EncodeToString([]byte(fmt.Sprintf(`{"alg":%q,"typ":"JWT","kid":%q}`, alg, f.user.kid)))
	}
	pub, err := didresolver.PublicKeyOf(f.user.priv)
	if err != nil {
		t.Fatal(err)
	}
	hs := func(secret []byte) string {
		in := hdr("HS256") + "." + parts[1]
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(in))
		return in + "." + enc.EncodeToString(m.Sum(nil))
	}
	raw := []byte(pub.(ed25519.PublicKey))
	for name, tok := range map[string]string{
		"none":                  hdr("none") + "." + parts[1] + ".",
		"None with signature":   hdr("None") + "." + parts[1] + "." + parts[2],
		"HS256 with public key": hs(raw),
		"HS256 with kid":        hs([]byte(f.user.kid)),
		"EdDSA sig, ES256 alg":  hdr("ES256") + "." + parts[1] + "." + parts[2],
		"jwk in header": enc.EncodeToString([]byte(`{"alg":"EdDSA","typ":"JWT","kid":"`+f.user.kid+`","jwk":{"kty":"OKP"}}`)) +
			"." + parts[1] + "." + parts[2],
		"crit": enc.EncodeToString([]byte(`{"alg":"EdDSA","typ":"JWT","kid":"`+f.user.kid+`","crit":["exp"]}`)) +
			"." + parts[1] + "." + parts[2],
	} {
		t.Run(name, func(t *testing.T) {
			for _, carrier := range []string{"Authorization", "Kya-Delegation"} {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				v := tok
				if carrier == "Authorization" {
					v = "Bearer " + tok
				}
				r.Header.Set(carrier, v)
				res := serve(t, h, r)
				if res.called || res.rec.Code != http.StatusUnauthorized {
					t.Errorf("%s: called=%t HTTP %d", carrier, res.called, res.rec.Code)
				}
			}
		})
	}
}

// TestIdentityHeadersEveryPath: forged identity headers, in every
// spelling an upstream stack could fold into ours, never reach next: not on
// an anonymous admission, a legacy pass, a proxied handshake, or a verified
// request (where only the edge's own values arrive).
func TestIdentityHeadersEveryPath(t *testing.T) {
	f := newFixture(t)
	forged := map[string][]string{
		"X-Agent-Did":              {"did:key:evil", "did:key:evil2"},
		"X_Agent_DID":              {"did:key:evil"},
		"x.agent.did":              {"did:key:evil"},
		"X-AGENT-DID":              {"did:key:evil"},
		"x-user-did":               {"did:key:evil"},
		"X_User.DID":               {"did:key:evil"},
		"X-Verified-Delegation":    {"forged"},
		"x_verified_delegation":    {"forged"},
		"X-Agent-Reputation-Score": {"100"},
		"Kya-Os-Agent-Did":         {"did:key:evil"},
		"KYA_OS_Delegation_Proof":  {"forged"},
		"Kya.Os.Agent.Did":         {"did:key:evil"},
	}
	check := func(t *testing.T, fwd *http.Request, edgeSet bool) {
		t.Helper()
		for k, vs := range fwd.Header {
			for _, v := range vs {
				if strings.Contains(v, "evil") || v == "forged" || v == "100" {
					t.Errorf("forged %s: %q reached next", k, v)
				}
			}
			n := strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(k))
			if !edgeSet && (strings.HasPrefix(n, "x-agent") || strings.HasPrefix(n, "x-user") || strings.HasPrefix(n, "x-verified") || strings.HasPrefix(n, "kya-")) {
				t.Errorf("identity header %s on a request admitted without identity", k)
			}
		}
	}
	spoof := func(r *http.Request) *http.Request {
		for k, v := range forged {
			r.Header[k] = v
		}
		return r
	}

	t.Run("anonymous", func(t *testing.T) {
		h := polHandler(t, f, func(c *setup) { c.Level = 2 })
		res := polServe(t, h, spoof(polPost(polCall(1, "public"), "")), nil)
		if !res.called {
			t.Fatalf("HTTP %d", res.rec.Code)
		}
		check(t, res.fwd, false)
	})
	t.Run("legacy pass", func(t *testing.T) {
		h := f.l3Handler(t, func(c *setup) { c.LegacyHandshake = LegacyPass })
		res := serve(t, h, spoof(newRequest(http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"}}`)))
		if !res.called {
			t.Fatalf("HTTP %d", res.rec.Code)
		}
		check(t, res.fwd, false)
	})
	t.Run("proxied handshake", func(t *testing.T) {
		up := newFakeUpstream(t, "/rpc/hs", "/rpc/vf")
		h := f.l3Handler(t, func(c *setup) {
			c.Handshake, c.HandshakeEndpoint, c.VerifyEndpoint = HandshakeProxy, "/rpc/hs", "/rpc/vf"
		})
		body, _ := json.Marshal(handshakeMsg(1, f.agent.did))
		l3Serve(t, h, spoof(newRequest(http.MethodPost, defaultHandshakePath, string(body))), up.handler())
		got := up.drain()
		if len(got) != 1 {
			t.Fatalf("upstream got %d requests", len(got))
		}
		check(t, &http.Request{Header: got[0].Header}, false)
	})
	t.Run("verified, level 2", func(t *testing.T) {
		h := f.l2Handler(t, nil, nil)
		r := spoof(newRequest(http.MethodPost, "/mcp", toolsCallBody))
		r.Header.Set("Authorization", "Bearer "+f.jwt(t, nil))
		res := serve(t, h, r)
		if !res.called {
			t.Fatalf("HTTP %d", res.rec.Code)
		}
		check(t, res.fwd, true)
		if got := res.fwd.Header.Values("X-Agent-Did"); len(got) != 1 || got[0] != f.agent.did {
			t.Errorf("X-Agent-DID %q, want only the edge's %q", got, f.agent.did)
		}
	})
}

// TestSessionTokens: edge sessions that were tampered with, cut, or
// presented twice are refused; a server's own Mcp-Session-Id is not a
// session; a session is bound to its audience, also across Hosts.
func TestSessionTokens(t *testing.T) {
	f := newFixture(t)
	h := f.l3Handler(t, nil)
	hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
	rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(1, answer(t, f.agent, hr), f.jwt(t, nil)), nil)
	var vr challenge.VerifyResult
	if err := json.Unmarshal(rep.Result, &vr); err != nil || vr.SessionID == "" {
		t.Fatalf("verify: %s", rep.Raw)
	}
	tok := vr.SessionID
	dot := strings.LastIndexByte(tok, '.')
	payload := tok[len(handshake.SessionPrefix):dot]
	claims, _ := base64.RawURLEncoding.DecodeString(payload)
	widened := bytes.Replace(claims, []byte(`"scp":[`), []byte(`"scp":["admin:all",`), 1)
	forgedPayload := handshake.SessionPrefix + base64.RawURLEncoding.EncodeToString(widened) + tok[dot:]

	sessionReq := func(hdr, v, host string) *http.Request {
		r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
		if host != "" {
			r.Host = host
		}
		r.Header.Add(hdr, v)
		return r
	}
	if res := serve(t, h, sessionReq(handshake.HeaderSession, tok, "")); !res.called {
		t.Fatalf("precondition: the session is refused: %d", res.rec.Code)
	}
	for name, r := range map[string]*http.Request{
		"scopes widened":           sessionReq(handshake.HeaderSession, forgedPayload, ""),
		"MAC cut":                  sessionReq(handshake.HeaderSession, tok[:len(tok)-4], ""),
		"payload cut":              sessionReq(handshake.HeaderSession, handshake.SessionPrefix+payload[:len(payload)-3]+tok[dot:], ""),
		"no MAC":                   sessionReq(handshake.HeaderSession, tok[:dot], ""),
		"other prefix":             sessionReq(handshake.HeaderSession, "mcpis2."+tok[len(handshake.SessionPrefix):], ""),
		"server session id":        sessionReq(handshake.HeaderMcpSessionID, "5f1e2d9c-2c4b-4e36-9b1b-1f0d7c9a6b11", ""),
		"forged in Mcp-Session-Id": sessionReq(handshake.HeaderMcpSessionID, forgedPayload, ""),
		"other host":               sessionReq(handshake.HeaderSession, tok, "mcp.other.example"),
		"two session headers": func() *http.Request {
			r := sessionReq(handshake.HeaderSession, tok, "")
			r.Header.Add(handshake.HeaderSession, tok)
			return r
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			res := serve(t, h, r)
			if res.called || res.rec.Code != http.StatusUnauthorized {
				t.Fatalf("called=%t HTTP %d, want 401", res.called, res.rec.Code)
			}
		})
	}
	// A session of another edge (another key) is not ours.
	other := f.l3Handler(t, nil)
	if res := serve(t, other, sessionReq(handshake.HeaderSession, tok, "")); res.called {
		t.Error("another edge's session admitted")
	}
	// require_scopes of a stricter route.
	strict := f.l3Handler(t, func(c *setup) { c.RequiredScopes = []string{"admin:all"} })
	strict.l3.UseSessions(h.l3.Sessions())
	if res := serve(t, strict, sessionReq(handshake.HeaderSession, tok, "")); res.called || res.rec.Code != http.StatusForbidden {
		t.Errorf("session without a required scope: called=%t HTTP %d", res.called, res.rec.Code)
	}
}

// TestLegacyPassStrict: under legacy_handshake pass, only exact
// legacy messages pass without a credential.
func TestLegacyPassStrict(t *testing.T) {
	f := newFixture(t)
	h := f.l3Handler(t, func(c *setup) { c.LegacyHandshake = LegacyPass })
	for name, body := range map[string]string{
		"PARAMS twice":         `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"},"PARAMS":{"name":"echo"}}`,
		"escaped params twice": `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi"},"p\u0061rams":{"name":"echo"}}`,
		"name not a string":    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":["_mcpi"]}}`,
		"legacy name escaped":  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi","n\u0061me":"echo"}}`,
		"near-miss name":       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"_mcpi "}}`,
		"Tools/Call":           `{"jsonrpc":"2.0","id":1,"method":"Tools/Call","params":{"name":"_mcpi"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if res := serve(t, h, newRequest(http.MethodPost, "/mcp", body)); res.called {
				t.Fatalf("forwarded without a credential: %s", body)
			}
		})
	}
}
