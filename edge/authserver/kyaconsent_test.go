package authserver

import (
	"context"
	"encoding/base64"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// testUserHeader stands for the route's authentication in these tests:
// the host's User reads it.
const testUserHeader = "X-Test-User"

// consentServer is a front door with draft-kya-http-02, whose host signs
// users in through testUserHeader, and with the built-in sign-in when
// signIn is set.
func consentServer(t *testing.T, st Store, keys KeyStorage, signIn bool) *Server {
	t.Helper()
	cfg := Config{KYAHTTP: &KYAHTTPConfig{TTL: time.Minute, Interval: time.Second}}
	if signIn {
		cfg.SignIn = &SignInConfig{Issuer: "https://idp.example", ClientID: "edge"}
	}
	s, err := New(context.Background(), cfg, Deps{
		Store:  st,
		Keys:   keys,
		Origin: func(*http.Request) string { return "https://edge.example" },
		User:   func(r *http.Request) string { return r.Header.Get(testUserHeader) },
		Scopes: []Scope{{Name: "a"}, {Name: "b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func memStore(t *testing.T) *challenge.MemoryStore {
	t.Helper()
	st := challenge.NewMemoryStore(context.Background())
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// sessionFor is a built-in sign-in session cookie of s for subject.
func sessionFor(s *Server, subject string) *http.Cookie {
	v := s.signIn.seal.seal(aad(sessionCookie), []byte(`{"s":"`+subject+`","i":"sess-`+subject+`","e":`+itoa(time.Now().Add(time.Hour).Unix())+`}`))
	return &http.Cookie{Name: sessionCookie, Value: v}
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// page GETs target as signed in by as (a cookie, or a user name for the
// host's authentication; nil: nobody).
func page(s *Server, target string, as any) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	signAs(req, as)
	rec := httptest.NewRecorder()
	s.Serve(rec, req)
	return rec
}

func signAs(req *http.Request, as any) {
	switch v := as.(type) {
	case *http.Cookie:
		req.AddCookie(v)
	case string:
		req.Header.Set(testUserHeader, v)
	}
}

// consentForm opens link as as and returns the form it shows.
func consentForm(t *testing.T, s *Server, link string, as any) url.Values {
	t.Helper()
	rec := page(s, link, as)
	if rec.Code != http.StatusOK {
		t.Fatalf("consent page: %d %s", rec.Code, rec.Body)
	}
	form := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(rec.Body.String(), -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	form.Set("approve", "1")
	return form
}

// postConsent posts form as as.
func postConsent(s *Server, form url.Values, as any) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "https://edge.example"+agentConsentAction, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	signAs(req, as)
	rec := httptest.NewRecorder()
	s.Serve(rec, req)
	return rec
}

func resumeLink(t *testing.T, s *Server, agent, resume string) string {
	t.Helper()
	link, ok := s.ConsentURL("https://edge.example", AgentPrompt{AgentDID: agent, Tool: "t", Missing: []string{"b"}, Held: []string{"a"}}, resume, time.Now())
	if !ok {
		t.Fatal("no consent link")
	}
	return link
}

// TestAgentConsentBuiltInSignIn: with the built-in sign-in, the agent
// consent page is the signed-in user's, as the OAuth consent page is: a
// browser without a session is sent to the login and brought back; with
// one, the page shows and its approval is the session user's.
func TestAgentConsentBuiltInSignIn(t *testing.T) {
	s := consentServer(t, memStore(t), nil, true)
	link := resumeLink(t, s, "did:key:zAgent", "rt-1")

	rec := page(s, link, nil)
	loc, _ := url.Parse(rec.Header().Get("Location"))
	if rec.Code != http.StatusFound || loc == nil || loc.Path != pathLogin {
		t.Fatalf("consent page without a session: %d Location %q, want 302 to %s", rec.Code, rec.Header().Get("Location"), pathLogin)
	}
	if ret := loc.Query().Get("return"); !strings.HasPrefix(ret, pathAuthorize+"?") || !strings.Contains(ret, ticketMACParam+"=") {
		t.Errorf("the login returns to %q, want the consent link", ret)
	}

	cookie := sessionFor(s, "oidc:https://idp.example#dana")
	form := consentForm(t, s, link, cookie)
	if rec := postConsent(s, form, cookie); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "You allowed the agent") {
		t.Fatalf("approval with the session: %d %s", rec.Code, rec.Body)
	}
	if _, ok, err := s.Approved(context.Background(), "rt-1", "did:key:zAgent"); err != nil || !ok {
		t.Fatalf("approved by the session user: ok %v err %v", ok, err)
	}
	ds, err := ListDelegations(context.Background(), s.users.st.(ListingStorage), s.users.opaqueID("oidc:https://idp.example#dana"), time.Now())
	if err != nil || len(ds) != 1 {
		t.Errorf("the session user's delegations: %v %v, want the one approved", ds, err)
	}

	// A post without a session is refused, never taken as someone's.
	if rec := postConsent(s, form, nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("post without a session: %d, want 401", rec.Code)
	}
}

// TestAgentConsentRecorded: a delegation approved at the agent consent
// page is the user's like any other: listed, counted toward the bound,
// and revocable (the edge then refuses its credential).
func TestAgentConsentRecorded(t *testing.T) {
	keys := newMemKeys()
	s := consentServer(t, memStore(t), keys, false)
	ctx := context.Background()
	uid := s.users.opaqueID("alice")

	form := consentForm(t, s, resumeLink(t, s, "did:key:zAgent", "rt-1"), "alice")
	if rec := postConsent(s, form, "alice"); rec.Code != http.StatusOK {
		t.Fatalf("approval: %d %s", rec.Code, rec.Body)
	}
	ds, err := ListDelegations(ctx, keys, uid, time.Now())
	if err != nil || len(ds) != 1 {
		t.Fatalf("alice's delegations after the approval: %v %v, want one", ds, err)
	}
	d := ds[0]
	if d.AgentDID != "did:key:zAgent" || strings.Join(d.Scopes, " ") != "b a" || d.UserDID != userDID("https://edge.example", uid) || d.Resource != "https://edge.example" {
		t.Errorf("the record: %+v", d)
	}
	tok, ok, err := s.Approved(ctx, "rt-1", "did:key:zAgent")
	if err != nil || !ok || !strings.Contains(tok, ".") {
		t.Fatalf("approved: %v %v", ok, err)
	}

	// Revoked from the user's page, as any delegation.
	pageForm := url.Values{"csrf": {s.pageCSRF("alice", time.Now())}, "family": {d.Family}}
	req := httptest.NewRequest(http.MethodPost, "https://edge.example"+pathDelegations, strings.NewReader(pageForm.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(testUserHeader, "alice")
	rec := httptest.NewRecorder()
	s.Serve(rec, req)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("revoking from the page: %d %s", rec.Code, rec.Body)
	}
	if rv, err := s.Revoked(ctx, d.Family); err != nil || !rv {
		t.Errorf("the approved delegation's family after revoking: revoked %v %v", rv, err)
	}

	// Counted toward the bound: a user at it is told to revoke one.
	for i := range MaxDelegationsPerUser {
		fam := randomToken()[:22]
		if err := s.recordDelegation(ctx, Delegation{Family: fam, UserID: uid, Scopes: []string{}, Created: time.Now(), Expires: time.Now().Add(time.Hour)}); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	form = consentForm(t, s, resumeLink(t, s, "did:key:zAgent", "rt-2"), "alice")
	rec = postConsent(s, form, "alice")
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), pathDelegations) {
		t.Errorf("approval over the bound: %d %s, want 409 naming %s", rec.Code, rec.Body, pathDelegations)
	}
	if _, ok, _ := s.Approved(ctx, "rt-2", "did:key:zAgent"); ok {
		t.Error("an approval over the bound was kept for the agent")
	}
}

// TestAgentConsentAnsweredOnce: a consent link is approved once: a second
// signed-in user's approval, or the same form posted again, is refused
// and leaves the first approval as it was.
func TestAgentConsentAnsweredOnce(t *testing.T) {
	keys := newMemKeys()
	s := consentServer(t, memStore(t), keys, false)
	ctx := context.Background()
	link := resumeLink(t, s, "did:key:zAgent", "rt-1")
	alice := consentForm(t, s, link, "alice")
	bob := consentForm(t, s, link, "bob")
	if rec := postConsent(s, alice, "alice"); rec.Code != http.StatusOK {
		t.Fatalf("alice's approval: %d %s", rec.Code, rec.Body)
	}
	for name, post := range map[string]func() *httptest.ResponseRecorder{
		"bob's approval":     func() *httptest.ResponseRecorder { return postConsent(s, bob, "bob") },
		"alice's form again": func() *httptest.ResponseRecorder { return postConsent(s, alice, "alice") },
		"alice's fresh form": func() *httptest.ResponseRecorder { return postConsent(s, consentForm(t, s, link, "alice"), "alice") },
	} {
		if rec := post(); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "already approved") {
			t.Errorf("%s: %d %s, want 409 already approved", name, rec.Code, rec.Body)
		}
	}
	if ds, _ := ListDelegations(ctx, keys, s.users.opaqueID("bob"), time.Now()); len(ds) != 0 {
		t.Errorf("bob has %d delegations from alice's link", len(ds))
	}
	if ds, _ := ListDelegations(ctx, keys, s.users.opaqueID("alice"), time.Now()); len(ds) != 1 {
		t.Errorf("alice has %d delegations, want 1 (one per link)", len(ds))
	}
	tok, ok, err := s.Approved(ctx, "rt-1", "did:key:zAgent")
	if err != nil || !ok || !strings.Contains(jwtPayload(tok), s.users.opaqueID("alice")) {
		t.Errorf("the approval is not alice's: %v %v", ok, err)
	}
}

// TestApprovedTakenOnce: the retry that gets an approval takes it: of
// retries racing on two replicas sharing Redis, exactly one gets it, and
// none after.
func TestApprovedTakenOnce(t *testing.T) {
	a, b := redisReplicas(t, func(t *testing.T, st Store, keys KeyStorage) *Server { return consentServer(t, st, keys, false) })
	ctx := context.Background()
	form := consentForm(t, a, resumeLink(t, a, "did:key:zAgent", "rt-1"), "alice")
	if rec := postConsent(a, form, "alice"); rec.Code != http.StatusOK {
		t.Fatalf("approval: %d %s", rec.Code, rec.Body)
	}
	if _, ok, _ := b.Approved(ctx, "rt-1", "did:key:zOther"); ok {
		t.Fatal("another agent got the approval")
	}
	got := race(8, a, b, func(_ int, s *Server) bool {
		_, ok, err := s.Approved(ctx, "rt-1", "did:key:zAgent")
		if err != nil {
			t.Error(err)
		}
		return ok
	})
	if got != 1 {
		t.Fatalf("%d racing retries got the approval, want exactly 1", got)
	}
	if _, ok, _ := a.Approved(ctx, "rt-1", "did:key:zAgent"); ok {
		t.Error("a later retry got the approval again")
	}
}

// jwtPayload is the decoded payload of a compact JWT, "" when it is none.
func jwtPayload(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	return string(b)
}
