package edge_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// frontDoor is an edge with the authorization server on, behind a stand-in
// for the host's authentication (HTTP basic, alice:secret) on the
// authorize path, in front of an MCP upstream that records what reaches it.
type frontDoor struct {
	t   *testing.T
	srv *httptest.Server
	h   *edge.Handler

	// host, when set, is the Host of every request: replicas behind one
	// name.
	host string

	mu        sync.Mutex
	admitted  []*vc.Delegation
	upstreams int
}

type userKey struct{}

// newFrontDoor starts one; store is the shared store (nil: the edge's own).
func newFrontDoor(t *testing.T, store challenge.NonceStore, mod func(*edge.Config), extra ...edge.Option) *frontDoor {
	t.Helper()
	f := &frontDoor{t: t}
	cfg := edge.Config{
		PolicyConfig: edge.PolicyConfig{Tools: []edge.ToolPolicy{
			{Name: "echo", Scopes: []string{"echo:execute"}},
			{Name: "files", Scopes: []string{"files:read"}},
		}},
		FrontDoorConfig: edge.FrontDoorConfig{AuthorizationServer: &authserver.Config{}, TrustAuthorizationServer: true},
	}
	if mod != nil {
		mod(&cfg)
	}
	opts := []edge.Option{edge.WithHooks(edge.Hooks{
		SignedInUser: func(r *http.Request) string { s, _ := r.Context().Value(userKey{}).(string); return s },
		// As replicas behind a load balancer: the Host is the public name.
		TrustedProxy: func(*http.Request) bool { return true },
		Identity: func(r *http.Request, d *vc.Delegation) {
			f.mu.Lock()
			f.admitted = append(f.admitted, d)
			f.mu.Unlock()
		},
	})}
	if store != nil {
		opts = append(opts, edge.WithNonceStore(store, "shared"))
	}
	h, err := edge.New(cfg, append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	f.h = h
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.upstreams++
		f.mu.Unlock()
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&msg)
		w.Header().Set("Content-Type", "application/json")
		switch msg.Method {
		case "tools/list":
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"files","inputSchema":{"type":"object"}}]}}`)
		default:
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"content":[{"type":"text","text":"ok"}]}}`)
		}
	})
	inner := h.Wrap(upstream)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/authorize" || r.URL.Path == "/oauth/delegations" {
			if u, p, ok := r.BasicAuth(); ok && u == "alice" && p == "secret" {
				r = r.WithContext(context.WithValue(r.Context(), userKey{}, "alice@example.com"))
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (f *frontDoor) do(req *http.Request) (*http.Response, []byte) {
	f.t.Helper()
	if f.host != "" {
		req.Host = f.host
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

func (f *frontDoor) get(path string, user bool) (*http.Response, []byte) {
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
	if user {
		req.SetBasicAuth("alice", "secret")
	}
	return f.do(req)
}

func (f *frontDoor) postForm(path string, v url.Values, user bool, hdr http.Header) (*http.Response, []byte) {
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if user {
		req.SetBasicAuth("alice", "secret")
	}
	return f.do(req)
}

// register registers a client with redirect URIs; it fails the test
// unless the registration is accepted.
func (f *frontDoor) register(redirects ...string) string {
	f.t.Helper()
	return f.registerNamed("Test Agent", redirects...)
}

// registerNamed registers a client that calls itself name.
func (f *frontDoor) registerNamed(name string, redirects ...string) string {
	f.t.Helper()
	b, _ := json.Marshal(map[string]any{"redirect_uris": redirects, "client_name": name, "token_endpoint_auth_method": "none"})
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/oauth/register", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	res, body := f.do(req)
	if res.StatusCode != http.StatusCreated {
		f.t.Fatalf("register: %d %s", res.StatusCode, body)
	}
	var out struct {
		ClientID string `json:"client_id"`
	}
	_ = json.Unmarshal(body, &out)
	return out.ClientID
}

// pkce is a verifier and its S256 challenge.
func pkce() (verifier, challenge string) {
	verifier = strings.Repeat("v", 20) + base64.RawURLEncoding.EncodeToString([]byte("0123456789abcdefghijklmnop"))
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authzQuery is an authorization request's query.
func (f *frontDoor) authzQuery(clientID, redirect, challenge, scope string) url.Values {
	v := url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "state": {"st-123"},
		"resource": {f.srv.URL + "/mcp"},
	}
	if scope != "" {
		v.Set("scope", scope)
	}
	return v
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// consentForm shows the consent page for q as alice and returns its
// hidden fields.
func (f *frontDoor) consentForm(q url.Values) url.Values {
	f.t.Helper()
	res, body := f.get("/oauth/authorize?"+q.Encode(), true)
	if res.StatusCode != http.StatusOK {
		f.t.Fatalf("consent page: %d %s", res.StatusCode, body)
	}
	form := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(string(body), -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	return form
}

// approve posts form with the ticked scopes and returns the redirect.
func (f *frontDoor) approve(form url.Values, scopes ...string) *url.URL {
	f.t.Helper()
	form = cloneValues(form)
	form["scope"] = scopes
	form.Set("approve", "1")
	res, body := f.postForm("/oauth/authorize", form, true, nil)
	if res.StatusCode != http.StatusFound {
		f.t.Fatalf("consent answer: %d %s", res.StatusCode, body)
	}
	u, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

type tokens struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
}

func (f *frontDoor) token(v url.Values, hdr http.Header) (int, tokens) {
	res, body := f.postForm("/oauth/token", v, false, hdr)
	var t tokens
	_ = json.Unmarshal(body, &t)
	return res.StatusCode, t
}

// flow runs registration, consent with scopes ticked, and the code
// exchange, and returns the tokens.
func (f *frontDoor) flow(scopes ...string) (string, tokens) {
	f.t.Helper()
	redirect := "http://127.0.0.1:33418/callback"
	id := f.register(redirect)
	verifier, challenge := pkce()
	loc := f.approve(f.consentForm(f.authzQuery(id, redirect, challenge, "")), scopes...)
	code := loc.Query().Get("code")
	status, tok := f.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {id},
		"redirect_uri": {redirect}, "code_verifier": {verifier}}, nil)
	if status != http.StatusOK {
		f.t.Fatalf("token: %d %+v", status, tok)
	}
	return id, tok
}

// call sends one JSON-RPC request with the credential and returns the
// status and body.
func (f *frontDoor) call(token, scheme, body string, hdr http.Header) (*http.Response, []byte) {
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", scheme+" "+token)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	return f.do(req)
}

const (
	echoCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	fileCall = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files","arguments":{}}}`
)

func (f *frontDoor) lastAdmitted() *vc.Delegation {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.admitted) == 0 {
		return nil
	}
	return f.admitted[len(f.admitted)-1]
}

// sharedKeys is key storage two edges share, as replicas share Caddy's.
type sharedKeys struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *sharedKeys) Load(_ context.Context, k string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.m[k]; ok {
		return b, nil
	}
	return nil, fs.ErrNotExist
}

func (s *sharedKeys) Store(_ context.Context, k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[k] = v
	return nil
}

func (s *sharedKeys) Exists(_ context.Context, k string) bool {
	_, err := s.Load(context.Background(), k)
	return err == nil
}
func (s *sharedKeys) Lock(context.Context, string) error   { return nil }
func (s *sharedKeys) Unlock(context.Context, string) error { return nil }
