package edge_test

import (
	"context"
	"html"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/authserver"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// List and Delete make sharedKeys listing storage, as Caddy's is.
func (s *sharedKeys) List(_ context.Context, prefix string, _ bool) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.m {
		if strings.HasPrefix(k, prefix+"/") {
			out = append(out, k)
		}
	}
	return out, nil
}

func (s *sharedKeys) Delete(_ context.Context, k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[k]; !ok {
		return fs.ErrNotExist
	}
	delete(s.m, k)
	return nil
}

// replicaPair is two edges sharing Redis and key storage behind one name,
// as replicas behind a load balancer.
func replicaPair(t *testing.T) (a, b *frontDoor) {
	t.Helper()
	redis := redistest.Start(t)
	keys := &sharedKeys{}
	replica := func() *frontDoor {
		st, err := challenge.NewRedisStore(challenge.RedisOptions{URL: redis.URL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return newFrontDoor(t, st, nil, edge.WithKeyStorage(keys))
	}
	a, b = replica(), replica()
	b.host = strings.TrimPrefix(a.srv.URL, "http://") // one name, two replicas
	return a, b
}

var (
	familyRE = regexp.MustCompile(`name="family" value="([^"]+)"`)
	csrfRE   = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// userPage is alice's delegations page, with its forms' fields.
func (f *frontDoor) userPage() (body string, csrf string, families []string) {
	f.t.Helper()
	res, b := f.get("/oauth/delegations", true)
	if res.StatusCode != http.StatusOK {
		f.t.Fatalf("delegations page: %d %s", res.StatusCode, b)
	}
	body = string(b)
	if m := csrfRE.FindStringSubmatch(body); m != nil {
		csrf = html.UnescapeString(m[1])
	}
	for _, m := range familyRE.FindAllStringSubmatch(body, -1) {
		families = append(families, m[1])
	}
	return body, csrf, families
}

// TestUserPageRevokeAcrossReplicas: alice sees on replica b the delegation
// she gave on replica a (client name, agent DID, scopes, last use), revokes
// it there, and replica a refuses its credential within seconds; its
// refresh token is dead too.
func TestUserPageRevokeAcrossReplicas(t *testing.T) {
	a, b := replicaPair(t)
	_, tok := a.flow("echo:execute")
	if res, body := a.call(tok.AccessToken, "Bearer", echoCall, nil); res.StatusCode != 200 {
		t.Fatalf("call before revocation: %d %s", res.StatusCode, body)
	}
	agent := a.lastAdmitted().AgentDID

	body, csrf, fams := b.userPage()
	if len(fams) != 1 {
		t.Fatalf("want one delegation on the page, got %v\n%s", fams, body)
	}
	for _, want := range []string{"Test Agent", html.EscapeString(agent), "echo:execute", "Revoke"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not show %q\n%s", want, body)
		}
	}
	if strings.Contains(body, "Last used</dt><dd>not yet") {
		t.Errorf("the page does not show the last use of a delegation just used\n%s", body)
	}
	res, _ := b.get("/oauth/delegations", true)
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("page CSP %q: want frame-ancestors 'none' and no scripts", csp)
	}
	if strings.Contains(body, "<script") {
		t.Error("the page has a script")
	}

	// Without the page's CSRF token, nothing is revoked.
	res, _ = b.postForm("/oauth/delegations", url.Values{"family": {fams[0]}, "revoke": {"1"}}, true, nil)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("revocation without CSRF token: %d, want 403", res.StatusCode)
	}
	if res, body := a.call(tok.AccessToken, "Bearer", echoCall, nil); res.StatusCode != 200 {
		t.Fatalf("a refused revocation revoked: %d %s", res.StatusCode, body)
	}

	res, _ = b.postForm("/oauth/delegations", url.Values{"family": {fams[0]}, "revoke": {"1"}, "csrf": {csrf}}, true, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("revocation: %d, want 303", res.StatusCode)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, body := a.call(tok.AccessToken, "Bearer", echoCall, nil)
		if res.StatusCode == 401 && strings.Contains(string(body), "revoked") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica a still admits the revoked credential: %d %s", res.StatusCode, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s, r := a.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {"x"}}, nil); s != 400 || r.Error != "invalid_grant" {
		t.Fatalf("refresh of a revoked family: %d %+v", s, r)
	}
	if _, _, fams := a.userPage(); len(fams) != 0 {
		t.Fatalf("the revoked delegation is still listed: %v", fams)
	}
}

// TestUserPageRefusals: without a signed-in user the page is refused;
// a user cannot revoke a family that is not theirs.
func TestUserPageRefusals(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	_, tok := f.flow("echo:execute")
	if res, _ := f.get("/oauth/delegations", false); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("page without a user: %d, want 401", res.StatusCode)
	}
	_, csrf, _ := f.userPage()
	res, _ := f.postForm("/oauth/delegations", url.Values{"family": {strings.Repeat("A", 22)}, "csrf": {csrf}}, true, nil)
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("revoking a family alice does not have: %d, want 404", res.StatusCode)
	}
	if res, body := f.call(tok.AccessToken, "Bearer", echoCall, nil); res.StatusCode != 200 {
		t.Fatalf("call: %d %s", res.StatusCode, body)
	}
}

// TestUserPageHidesRevoked: a delegation the client revoked at
// /oauth/revoke leaves the user's page.
func TestUserPageHidesRevoked(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	_, tok := f.flow("echo:execute")
	f.flow("echo:execute")
	if _, _, fams := f.userPage(); len(fams) != 2 {
		t.Fatalf("want 2 delegations listed, got %v", fams)
	}
	if res, _ := f.postForm("/oauth/revoke", url.Values{"token": {tok.RefreshToken}}, false, nil); res.StatusCode != 200 {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	if _, _, fams := f.userPage(); len(fams) != 1 {
		t.Fatalf("after the client revoked one, the page lists %v, want 1", fams)
	}
}

// TestUserPageBound: a user holds at most MaxDelegationsPerUser live
// delegations; one more is refused at the token endpoint, telling where to
// revoke.
func TestUserPageBound(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	redirect := "http://127.0.0.1:33418/callback"
	id := f.register(redirect)
	verifier, challenge := pkce()
	exchange := func() (int, tokens) {
		// A consent form is answered once: each delegation its own.
		form := f.consentForm(f.authzQuery(id, redirect, challenge, ""))
		code := f.approve(form, "echo:execute").Query().Get("code")
		return f.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {id},
			"redirect_uri": {redirect}, "code_verifier": {verifier}}, nil)
	}
	for i := range authserver.MaxDelegationsPerUser {
		if s, tok := exchange(); s != 200 {
			t.Fatalf("delegation %d: %d %+v", i+1, s, tok)
		}
	}
	s, tok := exchange()
	if s != 400 || tok.Error != "invalid_grant" {
		t.Fatalf("delegation %d: %d %+v, want invalid_grant", authserver.MaxDelegationsPerUser+1, s, tok)
	}
	_, _, fams := f.userPage()
	if len(fams) != authserver.MaxDelegationsPerUser {
		t.Fatalf("page lists %d, want %d", len(fams), authserver.MaxDelegationsPerUser)
	}
}
