package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/mcpi-edge/caddy-mcpi/internal/oidctest"
)

// signInSite is a front door with the built-in sign-in and no Caddy
// authentication module, its identity provider from the environment.
func signInSite(port int, upstream, lifetime string) string {
	life := ""
	if lifetime != "" {
		life = "\n\t\t\t\t\tsession_lifetime " + lifetime
	}
	return fmt.Sprintf(`:%d {
	bind 127.0.0.1
	route {
		mcpi {
			authorization_server {
				sign_in oidc {
					issuer {env.MCPI_OIDC_ISSUER}
					client_id {env.MCPI_OIDC_CLIENT_ID}
					client_secret {env.MCPI_OIDC_CLIENT_SECRET}%s
				}
			}
			trust authorization_server
			tool echo {
				scopes echo:execute
			}
			tool_default deny
		}
		reverse_proxy %s
	}
}
`, port, life, upstream)
}

// cookieOf returns the value of the browser's cookie name for u.
func (b *browser) cookieOf(u, name string) string {
	b.t.Helper()
	var val string
	b.do("reading cookies", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{u}})
		for _, c := range res.Cookies {
			if c.Name == name {
				val = c.Value
			}
		}
		return err
	}))
	return val
}

// TestFrontDoorBuiltInSignIn: through a real Caddy with no authentication
// module, headless Chromium follows the authorization URL to the identity
// provider (a small OIDC provider on loopback), comes back signed in,
// approves on the consent page, and the credential is admitted; the
// user's page lists it; a forged cookie and, after signing out, the old
// cookie are refused; a session past its lifetime is refused.
func TestFrontDoorBuiltInSignIn(t *testing.T) {
	b := newBrowser(t)
	op := oidctest.Start(oidctest.User{Subject: "u-7", Email: "dana@example.com"})
	t.Cleanup(op.Close)
	rec := &recorder{next: http.HandlerFunc(rpcEcho)}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	short := freePort(t) // a second site whose sessions last 2s
	dir := t.TempDir()
	h.start(dir, testCaddyfile(freePort(t), filepath.Join(dir, "storage"),
		signInSite(h.port, up.Listener.Addr().String(), "")+signInSite(short, up.Listener.Addr().String(), "2s")),
		"MCPI_OIDC_ISSUER="+op.Issuer, "MCPI_OIDC_CLIENT_ID="+op.ClientID, "MCPI_OIDC_CLIENT_SECRET="+op.ClientSecret)
	ctx := testContext(t)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string, cookies ...*http.Cookie) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}

	// A client registers and sends the user to the authorization URL.
	// The client's redirect URI, where the browser lands with the code.
	cb := serveUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "done") }))
	redirect := cb.URL + "/callback"
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/oauth/register", strings.NewReader(`{"redirect_uris":["`+redirect+`"],"client_name":"Browser Agent","token_endpoint_auth_method":"none"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 201 || json.Unmarshal(body, &reg) != nil {
		t.Fatalf("register: %d %s", res.StatusCode, body)
	}
	conf := &oauth2.Config{ClientID: reg.ClientID, RedirectURL: redirect,
		Endpoint: oauth2.Endpoint{AuthURL: h.base + "/oauth/authorize", TokenURL: h.base + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("st-b", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", h.base+"/mcp"))

	// Login at the provider, back to the consent page, signed in.
	page := b.openConsent(authURL)
	if text := page.text(); !strings.Contains(text, "dana@example.com") || !strings.Contains(text, "Browser Agent") {
		t.Fatalf("consent page after the sign-in at %s:\n%q\n%s", browserRun(b, "location", chromedp.Location()), text, browserRun(b, "html", chromedp.OuterHTML(chromedp.CSS("html"))))
	}
	if op.Logins != 1 || op.Tokens != 1 {
		t.Errorf("the provider saw %d logins and %d code exchanges, want 1 and 1", op.Logins, op.Tokens)
	}
	page.approve()
	loc, _ := url.Parse(b.waitLocation(redirect))
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	call, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
	call.Header.Set("Content-Type", "application/json")
	call.Header.Set("Accept", "application/json, text/event-stream")
	call.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	res, err = http.DefaultClient.Do(call)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("call with the credential: %d", res.StatusCode)
	}

	// The user's page lists it; its controls are labelled.
	b.do("opening the user's page", chromedp.Navigate(h.base+"/oauth/delegations"), chromedp.WaitVisible(chromedp.CSS(`button[type="submit"]`)))
	userPage := &consentPage{b: b}
	if text := userPage.text(); !strings.Contains(text, "Browser Agent") || !strings.Contains(text, "echo:execute") {
		t.Fatalf("user's page:\n%s", text)
	}
	if bad := userPage.unlabelled(); len(bad) > 0 {
		t.Errorf("unlabelled controls on the user's page: %v", bad)
	}
	sess := b.cookieOf(h.base, "__Host-mcpi-session")
	if sess == "" {
		t.Fatal("the browser holds no session cookie")
	}
	if res := get(h.base+"/oauth/delegations", &http.Cookie{Name: "__Host-mcpi-session", Value: sess}); res.StatusCode != 200 {
		t.Fatalf("the session cookie, sent again: %d", res.StatusCode)
	}
	forged := []byte(sess)
	forged[len(forged)/2] ^= 1
	if res := get(h.base+"/oauth/delegations", &http.Cookie{Name: "__Host-mcpi-session", Value: string(forged)}); res.StatusCode != 302 || !strings.HasPrefix(res.Header.Get("Location"), "/oauth/login") {
		t.Errorf("forged session cookie: %d to %q, want the redirect to the login", res.StatusCode, res.Header.Get("Location"))
	}

	// Sign out; the old cookie is refused afterwards.
	b.do("signing out", chromedp.Click(chromedp.CSS(`form[action="/oauth/logout"] button`)))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		if strings.Contains(text, "Signed out") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after signing out:\n%s", text)
		}
	}
	if b.cookieOf(h.base, "__Host-mcpi-session") != "" {
		t.Error("the browser still holds the session cookie after signing out")
	}
	if res := get(h.base+"/oauth/delegations", &http.Cookie{Name: "__Host-mcpi-session", Value: sess}); res.StatusCode != 302 {
		t.Errorf("the cookie of a signed-out session: %d, want the redirect to the login", res.StatusCode)
	}

	// A session past its lifetime (the 2s site), signed in without a browser.
	base := fmt.Sprintf("http://127.0.0.1:%d", short)
	res = get(base + "/oauth/login?return=/oauth/delegations")
	var login *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "__Host-mcpi-login" {
			login = c
		}
	}
	res = get(res.Header.Get("Location"))
	res = get(res.Header.Get("Location"), login)
	var short2 *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "__Host-mcpi-session" {
			short2 = c
		}
	}
	if short2 == nil {
		t.Fatalf("no session from the short site's login: %d", res.StatusCode)
	}
	if res := get(base+"/oauth/delegations", short2); res.StatusCode != 200 {
		t.Fatalf("fresh session: %d", res.StatusCode)
	}
	time.Sleep(2500 * time.Millisecond)
	if res := get(base+"/oauth/delegations", short2); res.StatusCode != 302 {
		t.Errorf("expired session cookie: %d, want the redirect to the login", res.StatusCode)
	}
}
