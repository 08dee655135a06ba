package edge_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// TestFrontDoorConsentPage: what the user reads. The lifetimes are in
// words; the client's chosen name stands beside its "not verified" mark,
// whatever it says; the page says the credential serves every MCP route
// of the host, beside the resource the client asked for.
func TestFrontDoorConsentPage(t *testing.T) {
	f := newFrontDoor(t, nil, func(c *edge.Config) {
		c.AuthorizationServer.CredentialLifetime = 90 * time.Minute
		c.AuthorizationServer.RefreshLifetime = 7 * 24 * time.Hour
	})
	id := f.registerNamed("✔ verified by your bank", redirect)
	_, challenge := pkce()
	res, body := f.get("/oauth/authorize?"+f.authzQuery(id, redirect, challenge, "").Encode(), true)
	page := string(body)
	host := strings.TrimPrefix(f.srv.URL, "http://")
	if res.StatusCode != 200 {
		t.Fatalf("consent page: %d %s", res.StatusCode, page)
	}
	for _, want := range []string{"90 minutes", "7 days",
		`<strong>✔ verified by your bank</strong>&nbsp;<span class="unverified">(name not verified)</span>`,
		"every MCP service of <code>" + host + "</code>", "it asked for <code>" + f.srv.URL + "/mcp</code>"} {
		if !strings.Contains(page, want) {
			t.Errorf("consent page lacks %q:\n%s", want, page)
		}
	}
	if regexp.MustCompile(`\dh\d+m\d+s`).MatchString(page) {
		t.Errorf("consent page shows a Go duration:\n%s", page)
	}
	if strings.Contains(page, "<title>") && strings.Contains(page[:strings.Index(page, "</title>")], "bank") {
		t.Errorf("the client's name is the page's title")
	}
}

// TestFrontDoorResource: a resource must be a plain URL of this edge: a
// query, encoded text, or prose the client put in it goes back to the
// client as invalid_target and is never shown to the user.
func TestFrontDoorResource(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	id := f.register(redirect)
	_, challenge := pkce()
	for name, res := range map[string]string{
		"prose":          f.srv.URL + "/Your bank approved this. Click Allow",
		"encoded prose":  f.srv.URL + "/Your%20bank%20approved%20this",
		"query":          f.srv.URL + "/mcp?note=approved",
		"empty query":    f.srv.URL + "/mcp?",
		"another origin": "http://elsewhere.example/mcp",
		"too long":       f.srv.URL + "/" + strings.Repeat("a", 200),
		"user info":      "http://u@" + strings.TrimPrefix(f.srv.URL, "http://") + "/mcp",
	} {
		t.Run(name, func(t *testing.T) {
			q := f.authzQuery(id, redirect, challenge, "")
			q.Set("resource", res)
			r, body := f.get("/oauth/authorize?"+q.Encode(), true)
			loc, _ := url.Parse(r.Header.Get("Location"))
			if r.StatusCode != http.StatusFound || loc.Query().Get("error") != "invalid_target" {
				t.Fatalf("resource %q: %d %s %s", res, r.StatusCode, r.Header.Get("Location"), body)
			}
		})
	}
	for _, res := range []string{f.srv.URL, f.srv.URL + "/", f.srv.URL + "/mcp", f.srv.URL + "/v1/mcp-server_2.~x"} {
		q := f.authzQuery(id, redirect, challenge, "")
		q.Set("resource", res)
		if r, body := f.get("/oauth/authorize?"+q.Encode(), true); r.StatusCode != 200 {
			t.Fatalf("resource %q: %d %s", res, r.StatusCode, body)
		}
	}
}

// TestFrontDoorConsentAnsweredOnce: a consent form posted a second time
// makes no second code.
func TestFrontDoorConsentAnsweredOnce(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	id := f.register(redirect)
	_, challenge := pkce()
	form := f.consentForm(f.authzQuery(id, redirect, challenge, ""))
	if loc := f.approve(form, "echo:execute"); loc.Query().Get("code") == "" {
		t.Fatalf("first answer: %s", loc)
	}
	form.Set("approve", "1")
	form["scope"] = []string{"echo:execute"}
	res, body := f.postForm("/oauth/authorize", form, true, nil)
	if res.StatusCode != http.StatusForbidden || strings.Contains(res.Header.Get("Location"), "code=") || !strings.Contains(string(body), "already answered") {
		t.Fatalf("second answer: %d %s %s", res.StatusCode, res.Header.Get("Location"), body)
	}
}
