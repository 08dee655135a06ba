package integration

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// startFrontDoor runs Caddy with the front door on: basic_auth (alice /
// secret) on the authorize path before mcpi, the authorization server, its
// users trusted, a tool policy, Level 2 identity headers, and the recorded
// upstream.
func startFrontDoor(t *testing.T) *harness {
	t.Helper()
	out, err := exec.Command(caddyBin, "hash-password", "--plaintext", "secret").Output()
	if err != nil {
		t.Fatalf("caddy hash-password: %v", err)
	}
	hash := strings.TrimSpace(string(out))
	rec := &recorder{next: http.HandlerFunc(rpcEcho)}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	caddyfile := testCaddyfile(freePort(t), filepath.Join(dir, "storage"), fmt.Sprintf(`:%d {
	bind 127.0.0.1
	route {
		basic_auth /oauth/authorize {
			alice %s
		}
		mcpi {
			level 2
			authorization_server {
				credential_lifetime 30m
			}
			trust authorization_server
			tool echo {
				scopes echo:execute
			}
			tool files {
				scopes files:read
			}
		}
		reverse_proxy %s
	}
}
`, h.port, hash, up.Listener.Addr().String()))
	h.start(dir, caddyfile)
	return h
}

// rpcEcho answers tools/list with two tools and any other request with a
// text result.
func rpcEcho(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.NewDecoder(r.Body).Decode(&msg)
	w.Header().Set("Content-Type", "application/json")
	if msg.Method == "tools/list" {
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"files","inputSchema":{"type":"object"}}]}}`)
		return
	}
	_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"content":[{"type":"text","text":"ok"}]}}`)
}

var consentHidden = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// TestFrontDoorThroughCaddy: a Go OAuth client (golang.org/x/oauth2)
// with no credential registers, the user signs in with Caddy's basic_auth
// and approves one of two scopes, the code is exchanged, and tools/list
// and a tools/call reach the upstream with the new delegation's
// X-Agent-DID and X-User-DID; the unapproved tool does not.
func TestFrontDoorThroughCaddy(t *testing.T) {
	h := startFrontDoor(t)
	ctx := testContext(t)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(req *http.Request) (*http.Response, []byte) {
		t.Helper()
		res, err := noFollow.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}

	// Discovery, as MCP clients do it, from the 401.
	req, _ := http.NewRequest(http.MethodPost, h.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	res, _ := do(req)
	wa := res.Header.Get("WWW-Authenticate")
	if res.StatusCode != 401 || !strings.Contains(wa, `resource_metadata="`+h.base+`/.well-known/oauth-protected-resource/mcp"`) {
		t.Fatalf("401: %d %q", res.StatusCode, wa)
	}
	req, _ = http.NewRequest(http.MethodGet, h.base+"/.well-known/oauth-protected-resource/mcp", nil)
	_, body := do(req)
	var prm struct {
		Resource string   `json:"resource"`
		AS       []string `json:"authorization_servers"`
	}
	if json.Unmarshal(body, &prm) != nil || prm.Resource != h.base+"/mcp" || len(prm.AS) != 1 || prm.AS[0] != h.base {
		t.Fatalf("RFC 9728: %s", body)
	}
	req, _ = http.NewRequest(http.MethodGet, prm.AS[0]+"/.well-known/oauth-authorization-server", nil)
	_, body = do(req)
	var md struct {
		Authz    string `json:"authorization_endpoint"`
		Token    string `json:"token_endpoint"`
		Register string `json:"registration_endpoint"`
	}
	if json.Unmarshal(body, &md) != nil || md.Register == "" {
		t.Fatalf("RFC 8414: %s", body)
	}

	// Registration (RFC 7591).
	redirect := "http://127.0.0.1:33418/callback"
	req, _ = http.NewRequest(http.MethodPost, md.Register, strings.NewReader(`{"redirect_uris":["`+redirect+`"],"client_name":"Go client","token_endpoint_auth_method":"none"}`))
	req.Header.Set("Content-Type", "application/json")
	res, body = do(req)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if res.StatusCode != 201 || json.Unmarshal(body, &reg) != nil {
		t.Fatalf("register: %d %s", res.StatusCode, body)
	}

	conf := &oauth2.Config{ClientID: reg.ClientID, RedirectURL: redirect,
		Endpoint: oauth2.Endpoint{AuthURL: md.Authz, TokenURL: md.Token, AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("st-9", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", prm.Resource))

	// Without signing in: Caddy's basic_auth answers.
	req, _ = http.NewRequest(http.MethodGet, authURL, nil)
	if res, _ := do(req); res.StatusCode != 401 {
		t.Fatalf("consent page without signing in: %d", res.StatusCode)
	}
	// A header naming a user is not a sign-in.
	req, _ = http.NewRequest(http.MethodGet, authURL, nil)
	req.Header.Set("X-User", "alice")
	req.Header.Set("Remote-User", "alice")
	if res, _ := do(req); res.StatusCode != 401 {
		t.Fatalf("consent page with a user header: %d", res.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodGet, authURL, nil)
	req.SetBasicAuth("alice", "secret")
	res, body = do(req)
	if res.StatusCode != 200 || !strings.Contains(string(body), "Go client") {
		t.Fatalf("consent page: %d %s", res.StatusCode, body)
	}
	form := url.Values{}
	for _, m := range consentHidden.FindAllStringSubmatch(string(body), -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	form["scope"] = []string{"echo:execute"} // files:read unticked
	form.Set("approve", "1")
	req, _ = http.NewRequest(http.MethodPost, md.Authz, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("alice", "secret")
	res, body = do(req)
	loc, _ := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != 302 || loc.Query().Get("iss") != h.base || loc.Query().Get("state") != "st-9" {
		t.Fatalf("consent answer: %d %s %s", res.StatusCode, loc, body)
	}

	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if tok.RefreshToken == "" || tok.Extra("scope") != "echo:execute" {
		t.Fatalf("token: %+v scope %v", tok, tok.Extra("scope"))
	}

	// The credential is admitted; the upstream learns who is calling.
	hc := conf.Client(ctx, tok)
	call := func(body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	h.upstream.Reset()
	if s, b := call(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); s != 200 || !strings.Contains(b, `"echo"`) || strings.Contains(b, `"files"`) {
		t.Fatalf("tools/list: %d %s", s, b)
	}
	if s, b := call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`); s != 200 || !strings.Contains(b, `"ok"`) {
		t.Fatalf("tools/call echo: %d %s", s, b)
	}
	if _, b := call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files","arguments":{}}}`); strings.Contains(b, `"ok"`) {
		t.Fatalf("tools/call files (unticked) answered: %s", b)
	}
	reqs := h.upstream.Requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream got %d requests, want 2 (list, echo)", len(reqs))
	}
	host := strings.ReplaceAll(strings.TrimPrefix(h.base, "http://"), ":", "%3A")
	for _, r := range reqs {
		user, agent := r.Header.Get("X-User-DID"), r.Header.Get("X-Agent-DID")
		if !strings.HasPrefix(user, "did:web:"+host+":oauth:users:") || !strings.HasPrefix(agent, "did:key:") || r.Header.Get("Authorization") != "" {
			t.Fatalf("upstream saw user %q agent %q authorization %q", user, agent, r.Header.Get("Authorization"))
		}
	}

	// The user's DID document is public; the discovery requests were not
	// audited as rejections.
	user := reqs[0].Header.Get("X-User-DID")
	req, _ = http.NewRequest(http.MethodGet, h.base+"/oauth/users/"+user[strings.LastIndexByte(user, ':')+1:]+"/did.json", nil)
	if res, body := do(req); res.StatusCode != 200 || !strings.Contains(string(body), user) {
		t.Fatalf("did.json: %d %s", res.StatusCode, body)
	}
	if n := strings.Count(h.output.String(), `"reason":"no_credential"`); n != 1 {
		t.Errorf("%d no_credential rejections logged, want 1 (the first POST only)", n)
	}
}
