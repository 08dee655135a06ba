package edge

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

const testHost = "mcp.example.com"

// party is a DID with its key; did:key, so everything resolves offline.
type party struct {
	priv     crypto.PrivateKey
	did, kid string
}

func newParty(t testing.TB) party {
	t.Helper()
	priv, err := didresolver.GenerateKey(didresolver.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := didresolver.PublicKeyOf(priv)
	if err != nil {
		t.Fatal(err)
	}
	did, kid, err := didresolver.KeyDID(pub)
	if err != nil {
		t.Fatal(err)
	}
	return party{priv, did, kid}
}

// fixture holds a user who delegates to an agent, and a handler trusting
// the user.
type fixture struct {
	user, agent party
}

func newFixture(t testing.TB) fixture {
	return fixture{user: newParty(t), agent: newParty(t)}
}

func (f fixture) template(mod func(*vc.Template)) vc.Template {
	now := time.Now()
	tm := vc.Template{
		AgentDID:  f.agent.did,
		UserDID:   f.user.did,
		Audience:  []string{"https://" + testHost},
		Scopes:    []string{"tools:read", "echo:execute"},
		NotBefore: now.Add(-time.Minute),
		ExpiresAt: now.Add(time.Hour),
		ID:        "urn:uuid:0b6c2b5e-6d3e-4d43-9b6b-1d6c7b0c1a11",
	}
	if mod != nil {
		mod(&tm)
	}
	return tm
}

func (f fixture) jwt(t testing.TB, mod func(*vc.Template)) string {
	t.Helper()
	s, err := vc.IssueJWT(f.user.priv, f.user.kid, f.template(mod))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f fixture) jsonVC(t testing.TB, mod func(*vc.Template)) []byte {
	t.Helper()
	b, err := vc.IssueJSON(f.user.priv.(ed25519.PrivateKey), f.user.kid, f.template(mod))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sharedStore is the nonce store of every Level 3 test handler that names
// none, as caddymodule shares its default store between configs.
var sharedStore = challenge.NewMemoryStore(context.Background())

// provision builds the handler with New, with the test hooks and, from
// Level 3, the shared nonce store (as Caddy's pooled default store); opts
// come after those, so a test's own win.
func provision(t testing.TB, cfg Config, opts ...Option) *Handler {
	t.Helper()
	base := []Option{WithHooks(testHooks)}
	if cfg.Level >= 3 {
		base = append(base, WithNonceStore(sharedStore, "memory"))
	}
	h, err := New(cfg, append(base, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// setup is what a test changes before New: the configuration and the
// options.
type setup struct {
	Config
	opts []Option
}

func (s *setup) use(opts ...Option) { s.opts = append(s.opts, opts...) }

// build runs mod over cfg and provisions the result.
func build(t testing.TB, cfg Config, mod func(*setup)) *Handler {
	t.Helper()
	s := setup{Config: cfg}
	if mod != nil {
		mod(&s)
	}
	return provision(t, s.Config, s.opts...)
}

// handler is a handler trusting f's user, with mod's changes.
func (f fixture) handler(t testing.TB, mod func(*setup)) *Handler {
	t.Helper()
	return build(t, Config{TrustedIssuers: []string{f.user.did}}, mod)
}

// result is what one request through the handler produced.
type result struct {
	rec     *httptest.ResponseRecorder
	called  bool
	fwd     *http.Request // the request next got
	fwdBody []byte
	repl    *testReplacer
}

func serve(t testing.TB, h *Handler, r *http.Request) result {
	t.Helper()
	res := result{rec: httptest.NewRecorder(), repl: newTestReplacer()}
	r = prepareRequest(r, res.repl)
	next := Next(func(w http.ResponseWriter, r *http.Request) error {
		res.called = true
		res.fwd = r
		if r.Body != nil && r.Method != http.MethodGet { // GET bodies must stay unread
			res.fwdBody, _ = io.ReadAll(r.Body)
		}
		w.WriteHeader(http.StatusOK)
		return nil
	})
	if err := h.ServeNext(res.rec, r, next); err != nil {
		t.Fatalf("ServeHTTP returned %v; rejections are written, not returned", err)
	}
	return res
}

const toolsCallBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`

func newRequest(method, target, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, "http://"+testHost+target, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// bodyWith puts v at params.<key> (or params.arguments.<key>) of a
// tools/call message.
func bodyWith(t testing.TB, key string, v any, inArguments bool) string {
	t.Helper()
	var msg map[string]any
	if err := json.Unmarshal([]byte(toolsCallBody), &msg); err != nil {
		t.Fatal(err)
	}
	params := msg["params"].(map[string]any)
	if inArguments {
		params["arguments"].(map[string]any)[key] = v
	} else {
		params[key] = v
	}
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type errBody struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
	Reason           string `json:"reason"`
	Scope            string `json:"scope"`
}

func decodeErr(t testing.TB, rec *httptest.ResponseRecorder) errBody {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q", cc)
	}
	var b errBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return b
}

// The 401 names the per-path document of the URL requested (RFC 9728 §3.3).
const wantResourceMetadata = `resource_metadata="http://` + testHost + `/.well-known/oauth-protected-resource/mcp"`

func TestServeHTTPCarriers(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	jwt := f.jwt(t, nil)
	jsonVC := f.jsonVC(t, nil)
	// How vc derives the delegation id is vc's business; ask it.
	d, err := h.verifier.Verify(context.Background(), []byte(jwt), vc.ForAudience("https://"+testHost))
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		carrier string
		req     func() *http.Request
	}{
		{"authorization", "authorization", func() *http.Request {
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Set("Authorization", "Bearer "+jwt)
			return r
		}},
		{"kya_delegation", "kya_delegation", func() *http.Request {
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Set("KYA-Delegation", jwt)
			return r
		}},
		{"kya_os_delegation_credential", "kya_os_delegation_credential", func() *http.Request {
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Set("KYA-OS-Delegation-Credential", jwt)
			return r
		}},
		{"mcp_i_credential", "mcp_i_credential", func() *http.Request {
			r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
			r.Header.Set("MCP-I-Credential", jwt)
			r.Header.Set("MCP-I-Delegation", "urn:uuid:0b6c2b5e-6d3e-4d43-9b6b-1d6c7b0c1a11")
			return r
		}},
		{"delegation_token", "delegation_token", func() *http.Request {
			return newRequest(http.MethodPost, "/mcp", bodyWith(t, "delegationToken", jwt, false))
		}},
		{"mcpi_delegation JSON VC", "mcpi_delegation", func() *http.Request {
			return newRequest(http.MethodPost, "/mcp", bodyWith(t, "_mcpi_delegation", json.RawMessage(jsonVC), true))
		}},
		{"mcpi_delegation string", "mcpi_delegation", func() *http.Request {
			return newRequest(http.MethodPost, "/mcp", bodyWith(t, "_mcpi_delegation", jwt, true))
		}},
		{"GET with header carrier", "authorization", func() *http.Request {
			r := newRequest(http.MethodGet, "/mcp", "")
			r.Header.Set("Accept", "text/event-stream")
			r.Header.Set("Authorization", "Bearer "+jwt)
			return r
		}},
		{"same credential in every carrier", "all", func() *http.Request {
			r := newRequest(http.MethodPost, "/mcp", bodyWith(t, "delegationToken", jwt, false))
			r.Header.Set("Authorization", "Bearer "+jwt)
			r.Header.Set("KYA-Delegation", jwt)
			r.Header.Set("KYA-OS-Delegation-Credential", " "+jwt+" ")
			r.Header.Set("MCP-I-Credential", jwt)
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := serve(t, h, tt.req())
			if !res.called {
				t.Fatalf("next not called: %d %s", res.rec.Code, res.rec.Body)
			}
			for _, k := range []string{"Authorization", "Kya-Delegation", "Kya-Os-Delegation-Credential", "Mcp-I-Credential", "Mcp-I-Delegation"} {
				if v := res.fwd.Header.Get(k); v != "" {
					t.Errorf("%s forwarded", k)
				}
			}
			body := string(res.fwdBody)
			if strings.Contains(body, "delegationToken") || strings.Contains(body, "_mcpi_delegation") || strings.Contains(body, jwt) {
				t.Errorf("body carrier forwarded: %s", body)
			}
			if res.fwd.Method == http.MethodPost {
				var msg struct {
					Params struct {
						Name      string         `json:"name"`
						Arguments map[string]any `json:"arguments"`
					} `json:"params"`
				}
				if err := json.Unmarshal(res.fwdBody, &msg); err != nil || msg.Params.Name != "echo" || msg.Params.Arguments["text"] != "hi" {
					t.Errorf("forwarded body damaged: %s (%v)", body, err)
				}
				if res.fwd.ContentLength != int64(len(res.fwdBody)) {
					t.Errorf("ContentLength %d, body %d bytes", res.fwd.ContentLength, len(res.fwdBody))
				}
			}
			want := map[string]string{
				"http.auth.user.id":        f.agent.did,
				"http.auth.user.agent_did": f.agent.did,
				"http.auth.user.user_did":  f.user.did,
				"mcpi.agent_did":           f.agent.did,
				"mcpi.user_did":            f.user.did,
				"mcpi.scopes":              "tools:read echo:execute",
				"mcpi.delegation_id":       d.DelegationID,
				"mcpi.issuer":              f.user.did,
			}
			for k, v := range want {
				if got, _ := res.repl.GetString(k); got != v {
					t.Errorf("placeholder %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestServeHTTPBodyRestoredWhenNoBodyCarrier(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	body := "{ \"jsonrpc\" : \"2.0\", \"id\": 1.50,\n \"method\": \"tools/list\" }\n"
	r := newRequest(http.MethodPost, "/mcp", body)
	r.Header.Set("KYA-Delegation", f.jwt(t, nil))
	res := serve(t, h, r)
	if !res.called || string(res.fwdBody) != body {
		t.Fatalf("body not restored byte for byte: %q", res.fwdBody)
	}
}

func TestServeHTTPRejections(t *testing.T) {
	f := newFixture(t)
	stranger := newParty(t)
	h := f.handler(t, nil)
	jwt := f.jwt(t, nil)

	expired := f.jwt(t, func(tm *vc.Template) {
		tm.NotBefore = time.Now().Add(-3 * time.Hour)
		tm.ExpiresAt = time.Now().Add(-2 * time.Hour)
	})
	parts := strings.Split(jwt, ".")
	sig := []byte(parts[2])
	if sig[10] == 'A' { // a middle character: changes the decoded bytes
		sig[10] = 'B'
	} else {
		sig[10] = 'A'
	}
	badSig := parts[0] + "." + parts[1] + "." + string(sig)
	untrusted, err := vc.IssueJWT(stranger.priv, stranger.kid, f.template(nil))
	if err != nil {
		t.Fatal(err)
	}
	wrongAud := f.jwt(t, func(tm *vc.Template) { tm.Audience = []string{"https://other.example"} })
	otherCred := f.jwt(t, func(tm *vc.Template) { tm.ID = "urn:uuid:other" })

	tests := []struct {
		name      string
		req       func() *http.Request
		status    int
		errCode   string
		reason    string
		wwwAuth   string
		token     string // must not be echoed
		handlerOf *Handler
	}{
		{
			name:    "no credential",
			req:     func() *http.Request { return newRequest(http.MethodPost, "/mcp", toolsCallBody) },
			status:  401,
			errCode: "invalid_token",
			wwwAuth: "Bearer " + wantResourceMetadata,
		},
		{
			name: "expired",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set("Authorization", "Bearer "+expired)
				return r
			},
			status: 401, errCode: "invalid_token", reason: vc.Reason(vc.ErrExpired), token: expired,
			wwwAuth: `Bearer error="invalid_token", error_description="expired", ` + wantResourceMetadata,
		},
		{
			name: "bad signature",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set("KYA-Delegation", badSig)
				return r
			},
			status: 401, errCode: "invalid_token", reason: vc.Reason(vc.ErrSignature), token: badSig,
		},
		{
			name: "untrusted issuer",
			req: func() *http.Request {
				return newRequest(http.MethodPost, "/mcp", bodyWith(t, "delegationToken", untrusted, false))
			},
			status: 401, errCode: "invalid_token", reason: vc.Reason(vc.ErrUntrustedIssuer), token: untrusted,
		},
		{
			name: "wrong audience",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set("MCP-I-Credential", wrongAud)
				return r
			},
			status: 401, errCode: "invalid_token", reason: vc.Reason(vc.ErrAudience), token: wrongAud,
		},
		{
			name: "garbage in a header carrier",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set("KYA-Delegation", "not-a-credential")
				return r
			},
			status: 401, errCode: "invalid_token", reason: vc.Reason(vc.ErrMalformed), token: "not-a-credential",
		},
		{
			name: "conflicting carriers",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", bodyWith(t, "delegationToken", otherCred, false))
				r.Header.Set("Authorization", "Bearer "+jwt)
				return r
			},
			status: 400, errCode: "invalid_request", token: jwt,
		},
		{
			name: "conflicting header carriers",
			req: func() *http.Request {
				r := newRequest(http.MethodGet, "/mcp", "")
				r.Header.Set("KYA-Delegation", jwt)
				r.Header.Set("KYA-OS-Delegation-Credential", otherCred)
				return r
			},
			status: 400, errCode: "invalid_request", token: otherCred,
		},
		{
			name: "conflicting duplicate body keys",
			req: func() *http.Request {
				body := `{"method":"tools/call","params":{"delegationToken":"` + jwt + `","delegationToken":"` + otherCred + `"}}`
				return newRequest(http.MethodPost, "/mcp", body)
			},
			status: 400, errCode: "invalid_request", token: jwt,
		},
		{
			name: "oversized body",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", bodyWith(t, "pad", strings.Repeat("x", 4096), false))
				r.Header.Set("Authorization", "Bearer "+jwt)
				return r
			},
			handlerOf: f.handler(t, func(c *setup) { c.MaxBodySize = 1024 }),
			status:    413, errCode: "invalid_request", token: jwt,
		},
		{
			name: "oversized chunked body",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", bodyWith(t, "pad", strings.Repeat("x", 4096), false))
				r.ContentLength = -1
				r.Header.Set("Authorization", "Bearer "+jwt)
				return r
			},
			handlerOf: f.handler(t, func(c *setup) { c.MaxBodySize = 1024 }),
			status:    413, errCode: "invalid_request", token: jwt,
		},
		{
			name: "credential too large",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set("KYA-Delegation", jwt)
				return r
			},
			handlerOf: f.handler(t, func(c *setup) { c.MaxCredentialSize = 64 }),
			status:    401, errCode: "invalid_token", reason: vc.Reason(vc.ErrTooLarge), token: jwt,
		},
		{
			name: "non-delegation bearer with reject",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set("Authorization", "Bearer gho_oauthtoken")
				r.Header.Set("KYA-Delegation", jwt)
				return r
			},
			handlerOf: f.handler(t, func(c *setup) { c.NonDelegationBearer = BearerReject }),
			status:    401, errCode: "invalid_token", reason: "not_a_delegation", token: "gho_oauthtoken",
		},
		{
			name: "non-delegation bearer alone with pass",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set("Authorization", "Bearer gho_oauthtoken")
				return r
			},
			status: 401, errCode: "invalid_token", token: "gho_oauthtoken",
			wwwAuth: "Bearer " + wantResourceMetadata,
		},
		{
			name: "route scope missing",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set("Authorization", "Bearer "+jwt)
				return r
			},
			handlerOf: f.handler(t, func(c *setup) { c.RequiredScopes = []string{"tools:read", "admin:write"} }),
			status:    403, errCode: "insufficient_scope", reason: vc.Reason(vc.ErrMissingScope), token: jwt,
			wwwAuth: `Bearer error="insufficient_scope", scope="tools:read admin:write", error_description="missing_scope", ` + wantResourceMetadata,
		},
		{
			name: "require_audience and no audience",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set("Authorization", "Bearer "+f.jwt(t, func(tm *vc.Template) { tm.Audience = nil }))
				return r
			},
			handlerOf: f.handler(t, func(c *setup) { c.RequireAudience = true }),
			status:    401, errCode: "invalid_token", reason: vc.Reason(vc.ErrAudience),
		},
		{
			name: "configured audience replaces the derived ones",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set("Authorization", "Bearer "+jwt)
				return r
			},
			handlerOf: f.handler(t, func(c *setup) { c.Audiences = []string{"did:web:api.example.com"} }),
			status:    401, errCode: "invalid_token", reason: vc.Reason(vc.ErrAudience), token: jwt,
		},
		{
			name: "disabled carrier is ignored",
			req: func() *http.Request {
				r := newRequest(http.MethodPost, "/mcp", bodyWith(t, "delegationToken", jwt, false))
				r.Header.Set("KYA-Delegation", jwt)
				return r
			},
			handlerOf: f.handler(t, func(c *setup) { c.Carriers = []string{"authorization", "mcp_i_credential"} }),
			status:    401, errCode: "invalid_token", token: jwt,
			wwwAuth: "Bearer " + wantResourceMetadata,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hh := h
			if tt.handlerOf != nil {
				hh = tt.handlerOf
			}
			r := tt.req()
			r.Header.Set("X-Agent-DID", "did:key:spoofed")
			res := serve(t, hh, r)
			if res.called {
				t.Fatal("next called")
			}
			if res.rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", res.rec.Code, tt.status, res.rec.Body)
			}
			b := decodeErr(t, res.rec)
			if b.Error != tt.errCode || b.Reason != tt.reason || b.ErrorDescription == "" {
				t.Errorf("body %+v, want error %q reason %q", b, tt.errCode, tt.reason)
			}
			www := res.rec.Header().Get("WWW-Authenticate")
			switch {
			case tt.wwwAuth != "":
				if www != tt.wwwAuth {
					t.Errorf("WWW-Authenticate:\n got %s\nwant %s", www, tt.wwwAuth)
				}
			case tt.status == 401:
				want := `Bearer error="invalid_token", error_description="` + tt.reason + `", ` + wantResourceMetadata
				if www != want {
					t.Errorf("WWW-Authenticate:\n got %s\nwant %s", www, want)
				}
			}
			if tt.token != "" && (strings.Contains(res.rec.Body.String(), tt.token) || strings.Contains(www, tt.token)) {
				t.Error("token echoed in the response")
			}
			if tt.status == 401 && tt.reason == "" && b.ErrorDescription != "no delegation credential presented" {
				t.Errorf("error_description %q", b.ErrorDescription)
			}
			if tt.status == 400 && b.ErrorDescription != "conflicting delegation credentials" {
				t.Errorf("error_description %q", b.ErrorDescription)
			}
		})
	}
}

func TestServeHTTPNonDelegationBearerPass(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	const oauth = "Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln"
	r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set("Authorization", oauth)
	r.Header.Set("KYA-Delegation", f.jwt(t, nil))
	res := serve(t, h, r)
	if !res.called {
		t.Fatalf("next not called: %d %s", res.rec.Code, res.rec.Body)
	}
	if got := res.fwd.Header.Get("Authorization"); got != oauth {
		t.Errorf("Authorization = %q, want the OAuth bearer untouched", got)
	}
	if res.fwd.Header.Get("Kya-Delegation") != "" {
		t.Error("KYA-Delegation forwarded")
	}
}

func TestServeHTTPDisabledCarrierAlongsideValid(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) { c.Carriers = []string{"authorization"} })
	r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set("Authorization", "Bearer "+f.jwt(t, nil))
	r.Header.Set("MCP-I-Credential", "something-else") // ignored: no conflict
	res := serve(t, h, r)
	if !res.called {
		t.Fatalf("next not called: %d %s", res.rec.Code, res.rec.Body)
	}
}

func TestServeHTTPSpoofedIdentityHeaders(t *testing.T) {
	f := newFixture(t)
	jwt := f.jwt(t, nil)
	spoof := func(r *http.Request) {
		r.Header.Set("X-Agent-DID", "did:key:evil")
		r.Header["x-user-did"] = []string{"did:key:evil"} // as an HTTP/2 or raw map key
		r.Header["X_Agent_DID"] = []string{"did:key:evil"}
		r.Header.Set("KYA-OS-Agent-DID", "did:key:evil")
		r.Header.Set("X-Verified-Delegation", "forged")
		r.Header.Set("X-Agent-Reputation-Score", "100")
	}
	for _, passthrough := range []bool{false, true} {
		h := f.handler(t, func(c *setup) { c.PassthroughCredential = passthrough })
		// With a valid credential: next runs, the spoofs do not reach it.
		r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
		r.Header.Set("Authorization", "Bearer "+jwt)
		spoof(r)
		res := serve(t, h, r)
		if !res.called {
			t.Fatalf("next not called: %d", res.rec.Code)
		}
		for k, v := range res.fwd.Header {
			if strings.Contains(strings.Join(v, ""), "evil") || v[0] == "forged" || v[0] == "100" {
				t.Errorf("passthrough=%v: spoofed header %s reached next", passthrough, k)
			}
		}
		// Without one: next never runs at all.
		r = newRequest(http.MethodPost, "/mcp", toolsCallBody)
		spoof(r)
		if res := serve(t, h, r); res.called || res.rec.Code != 401 {
			t.Errorf("spoofed headers alone: called=%v status=%d", res.called, res.rec.Code)
		}
	}
}

func TestServeHTTPPassthroughCredential(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) { c.PassthroughCredential = true })
	jwt := f.jwt(t, nil)
	body := bodyWith(t, "delegationToken", jwt, false)
	r := newRequest(http.MethodPost, "/mcp", body)
	r.Header.Set("Authorization", "Bearer "+jwt)
	res := serve(t, h, r)
	if !res.called {
		t.Fatalf("next not called: %d", res.rec.Code)
	}
	if res.fwd.Header.Get("Authorization") != "Bearer "+jwt || string(res.fwdBody) != body {
		t.Error("passthrough_credential did not forward the carriers unchanged")
	}
}

func TestServeHTTPResourceMetadata(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) { c.AuthorizationServers = []string{"https://auth.example.com"} })
	for path, resource := range map[string]string{
		"/.well-known/oauth-protected-resource":     "http://" + testHost,
		"/.well-known/oauth-protected-resource/mcp": "http://" + testHost + "/mcp",
	} {
		res := serve(t, h, newRequest(http.MethodGet, path, ""))
		if res.called || res.rec.Code != 200 {
			t.Fatalf("%s: called=%v status=%d", path, res.called, res.rec.Code)
		}
		var doc map[string]any
		if err := json.Unmarshal(res.rec.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"resource":                 resource,
			"authorization_servers":    []any{"https://auth.example.com"},
			"bearer_methods_supported": []any{"header"},
			"mcpi_levels_supported":    []any{1.0},
		}
		if got, _ := json.Marshal(doc); string(got) != mustJSON(want) {
			t.Errorf("%s: document %s, want %s", path, got, mustJSON(want))
		}
	}
	// TLS requests get an https resource.
	r := newRequest(http.MethodGet, "/.well-known/oauth-protected-resource", "")
	r.TLS = &tls.ConnectionState{}
	res := serve(t, h, r)
	if !strings.Contains(res.rec.Body.String(), `"resource":"https://`+testHost+`"`) {
		t.Errorf("TLS document %s", res.rec.Body)
	}
	// Not the well-known path, not a GET: a credential is needed.
	if res := serve(t, h, newRequest(http.MethodPost, "/.well-known/oauth-protected-resource", "")); res.rec.Code != 401 {
		t.Errorf("POST to the metadata path: %d", res.rec.Code)
	}
	if res := serve(t, h, newRequest(http.MethodGet, "/.well-known/oauth-protected-resourcex", "")); res.rec.Code != 401 {
		t.Errorf("lookalike path: %d", res.rec.Code)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestServeHTTPDoesNotReadGETBody(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	r := newRequest(http.MethodGet, "/mcp", "")
	r.Header.Set("Accept", "text/event-stream")
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+f.jwt(t, nil))
	r.Body = io.NopCloser(failReader{t})
	r.ContentLength = -1
	res := serve(t, h, r)
	if !res.called {
		t.Fatalf("next not called: %d", res.rec.Code)
	}
}

func BenchmarkServeHTTPValid(b *testing.B) {
	f := newFixture(b)
	h := f.handler(b, nil)
	auth := "Bearer " + f.jwt(b, nil)
	next := Next(func(http.ResponseWriter, *http.Request) error { return nil })
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "http://"+testHost+"/mcp", strings.NewReader(toolsCallBody))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		r = prepareRequest(r, newTestReplacer())
		if err := h.ServeNext(w, r, next); err != nil || w.Code != 200 {
			b.Fatalf("status %d: %v", w.Code, err)
		}
	}
}

// failReader fails the test when anything reads it: GET bodies and SSE
// streams must never be touched.
type failReader struct{ t *testing.T }

func (f failReader) Read([]byte) (int, error) {
	f.t.Error("body was read")
	return 0, io.EOF
}
