package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// replicaSite is one replica of a front door: basic_auth on the consent
// page and the user's page, the shared Redis store, a scope per tool.
func replicaSite(port int, upstream, hash, redisURL string) string {
	return fmt.Sprintf(`:%d {
	bind 127.0.0.1
	route {
		@signin path /oauth/authorize /oauth/delegations
		basic_auth @signin {
			alice %s
		}
		mcpi {
			authorization_server
			trust authorization_server
			nonce_store redis %s
			tool echo {
				scopes echo:execute
			}
			tool_default deny
		}
		reverse_proxy %s
	}
}
`, port, hash, redisURL, upstream)
}

// replicaCaddyfile is testCaddyfile whose servers trust the loopback load
// balancer: the Host a request carries is the public name, whichever
// replica's port it reached.
func replicaCaddyfile(adminPort int, storageRoot, site string) string {
	return strings.Replace(testCaddyfile(adminPort, storageRoot, site), "\tgrace_period 1ns\n",
		"\tgrace_period 1ns\n\tservers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}\n", 1)
}

// replicas are two Caddy processes sharing Caddy's storage and Redis,
// behind one public name (replica a's host): a load balancer's replicas.
type replicas struct {
	a, b    *harness
	config  string // replica a's Caddyfile, for the command line
	dir     string
	public  string // the Host both answer as
	noRedir *http.Client
}

func startReplicas(t *testing.T) *replicas {
	t.Helper()
	out, err := exec.Command(caddyBin, "hash-password", "--plaintext", "secret").Output()
	if err != nil {
		t.Fatalf("caddy hash-password: %v", err)
	}
	hash := strings.TrimSpace(string(out))
	redis := redistest.Start(t)
	rec := &recorder{next: http.HandlerFunc(rpcEcho)}
	up := serveUpstream(t, rec)
	storage := filepath.Join(t.TempDir(), "storage")
	rs := &replicas{noRedir: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for i, h := range []**harness{&rs.a, &rs.b} {
		*h = newEdgeHarness(t, rec)
		dir := t.TempDir()
		(*h).start(dir, replicaCaddyfile(freePort(t), storage, replicaSite((*h).port, up.Listener.Addr().String(), hash, redis.URL())))
		if i == 0 {
			rs.config, rs.dir = filepath.Join(dir, "Caddyfile"), dir
		}
	}
	rs.public = strings.TrimPrefix(rs.a.base, "http://")
	return rs
}

// do sends req to replica h as the public name, and reads the answer.
func (rs *replicas) do(t *testing.T, h *harness, req *http.Request) (*http.Response, string) {
	t.Helper()
	u := *req.URL
	u.Host = strings.TrimPrefix(h.base, "http://")
	req.URL = &u
	req.Host = rs.public
	res, err := rs.noRedir.Do(req.WithContext(testContext(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// grant registers a client named name on replica h, consents as alice to
// echo:execute, and returns the tokens.
func (rs *replicas) grant(t *testing.T, h *harness, name string) *oauth2.Token {
	t.Helper()
	base := "http://" + rs.public
	redirect := "http://127.0.0.1:33418/callback"
	req, _ := http.NewRequest(http.MethodPost, base+"/oauth/register", strings.NewReader(`{"redirect_uris":["`+redirect+`"],"client_name":"`+name+`","token_endpoint_auth_method":"none"}`))
	req.Header.Set("Content-Type", "application/json")
	res, body := rs.do(t, h, req)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if res.StatusCode != 201 || json.Unmarshal([]byte(body), &reg) != nil {
		t.Fatalf("register: %d %s", res.StatusCode, body)
	}
	conf := &oauth2.Config{ClientID: reg.ClientID, RedirectURL: redirect,
		Endpoint: oauth2.Endpoint{AuthURL: base + "/oauth/authorize", TokenURL: base + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	req, _ = http.NewRequest(http.MethodGet, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", base+"/mcp")), nil)
	req.SetBasicAuth("alice", "secret")
	res, body = rs.do(t, h, req)
	if res.StatusCode != 200 {
		t.Fatalf("consent page: %d %s", res.StatusCode, body)
	}
	form := url.Values{}
	for _, m := range consentHidden.FindAllStringSubmatch(body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	form["scope"] = []string{"echo:execute"}
	form.Set("approve", "1")
	req, _ = http.NewRequest(http.MethodPost, base+"/oauth/authorize", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("alice", "secret")
	res, body = rs.do(t, h, req)
	loc, _ := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != 302 || loc.Query().Get("code") == "" {
		t.Fatalf("consent answer: %d %s", res.StatusCode, body)
	}
	tv := url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "client_id": {reg.ClientID},
		"redirect_uri": {redirect}, "code_verifier": {verifier}}
	return rs.token(t, h, tv)
}

func (rs *replicas) token(t *testing.T, h *harness, v url.Values) *oauth2.Token {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+rs.public+"/oauth/token", strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, body := rs.do(t, h, req)
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		Error        string `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &tok)
	if res.StatusCode != 200 {
		return &oauth2.Token{TokenType: "error:" + tok.Error}
	}
	return &oauth2.Token{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken}
}

// call makes an echo tool call on replica h with the credential.
func (rs *replicas) call(t *testing.T, h *harness, tok string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+rs.public+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	res, body := rs.do(t, h, req)
	return res.StatusCode, body
}

// refusedWithin waits until replica h refuses tok as revoked.
func (rs *replicas) refusedWithin(t *testing.T, h *harness, tok string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s, body := rs.call(t, h, tok)
		if s == 401 && strings.Contains(body, "revoked") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still admitted %s after the revocation: %d %s", d, s, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cli runs `caddy mcpi delegations <args>` on replica a's config.
func (rs *replicas) cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, caddyBin, append(append([]string{"mcpi", "delegations"}, args...), "--config", rs.config, "--adapter", "caddyfile")...)
	cmd.Env = append(os.Environ(), "HOME="+rs.dir, "XDG_DATA_HOME="+rs.dir, "XDG_CONFIG_HOME="+rs.dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.String(), err
	}
	return string(out), nil
}

type listedDelegation struct {
	Family     string   `json:"family"`
	UserDID    string   `json:"user_did"`
	ClientName string   `json:"client_name"`
	AgentDID   string   `json:"agent_did"`
	Scopes     []string `json:"scopes"`
	LastUse    string   `json:"last_use"`
}

func (rs *replicas) list(t *testing.T) []listedDelegation {
	t.Helper()
	out, err := rs.cli(t, "list")
	if err != nil {
		t.Fatalf("caddy mcpi delegations list: %v\n%s", err, out)
	}
	var ds []listedDelegation
	if err := json.Unmarshal([]byte(out), &ds); err != nil {
		t.Fatalf("list output is not a JSON list: %v\n%s", err, out)
	}
	return ds
}

var pageCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestFrontDoorUserPageReplicas: through two real Caddy replicas sharing
// storage and Redis, alice revokes on replica b's page a delegation given
// on replica a, and a refuses its credential within seconds; the command
// line lists the delegations (client, agent, scopes, last use) and revokes
// one, which both replicas then refuse.
func TestFrontDoorUserPageReplicas(t *testing.T) {
	rs := startReplicas(t)
	first := rs.grant(t, rs.a, "Agent One")
	second := rs.grant(t, rs.a, "Agent Two")
	for _, tok := range []string{first.AccessToken, second.AccessToken} {
		if s, body := rs.call(t, rs.b, tok); s != 200 {
			t.Fatalf("replica b before revocation: %d %s", s, body)
		}
	}

	ds := rs.list(t)
	if len(ds) != 2 {
		t.Fatalf("the command line lists %d delegations, want 2: %+v", len(ds), ds)
	}
	byName := map[string]listedDelegation{}
	for _, d := range ds {
		byName[d.ClientName] = d
		if !strings.Contains(d.UserDID, ":oauth:users:") || !strings.HasPrefix(d.AgentDID, "did:") || len(d.Scopes) != 1 || d.Scopes[0] != "echo:execute" || d.LastUse == "" {
			t.Errorf("listed delegation %+v: want the user DID, agent DID, echo:execute and a last use", d)
		}
	}

	// The user's page on replica b.
	req, _ := http.NewRequest(http.MethodGet, "http://x/oauth/delegations", nil)
	req.SetBasicAuth("alice", "secret")
	res, page := rs.do(t, rs.b, req)
	if res.StatusCode != 200 || !strings.Contains(page, "Agent One") || !strings.Contains(page, "Agent Two") || !strings.Contains(page, html.EscapeString(byName["Agent One"].AgentDID)) {
		t.Fatalf("user page on b: %d\n%s", res.StatusCode, page)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("user page CSP %q", csp)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://x/oauth/delegations", nil)
	if res, _ := rs.do(t, rs.b, req); res.StatusCode != 401 {
		t.Errorf("user page without signing in: %d, want basic_auth's 401", res.StatusCode)
	}
	csrf := html.UnescapeString(pageCSRF.FindStringSubmatch(page)[1])
	form := url.Values{"family": {byName["Agent One"].Family}, "csrf": {csrf}, "revoke": {"1"}}
	req, _ = http.NewRequest(http.MethodPost, "http://x/oauth/delegations", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("alice", "secret")
	if res, body := rs.do(t, rs.b, req); res.StatusCode != 303 {
		t.Fatalf("revoking on b's page: %d %s", res.StatusCode, body)
	}
	rs.refusedWithin(t, rs.a, first.AccessToken, 5*time.Second)
	if tok := rs.token(t, rs.a, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.RefreshToken}, "client_id": {"x"}}); tok.TokenType != "error:invalid_grant" {
		t.Fatalf("refresh of the revoked delegation on a: %+v", tok)
	}
	if s, body := rs.call(t, rs.a, second.AccessToken); s != 200 {
		t.Fatalf("the other delegation was revoked too: %d %s", s, body)
	}

	// The command line revokes the other.
	out, err := rs.cli(t, "revoke", byName["Agent Two"].Family)
	if err != nil || !strings.Contains(out, byName["Agent Two"].Family) {
		t.Fatalf("caddy mcpi delegations revoke: %v\n%s", err, out)
	}
	rs.refusedWithin(t, rs.b, second.AccessToken, 5*time.Second)
	rs.refusedWithin(t, rs.a, second.AccessToken, 5*time.Second)
	if ds := rs.list(t); len(ds) != 0 {
		t.Fatalf("revoked delegations still listed: %+v", ds)
	}
	if out, err := rs.cli(t, "revoke", byName["Agent Two"].Family); err == nil {
		t.Errorf("revoking an unknown delegation succeeded: %s", out)
	}
}
