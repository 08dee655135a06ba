package authserver

import (
	"crypto/rand"
	"encoding/base64"
	"html/template"
	"net/http"
	"strconv"
	"time"
)

// The user's own page: the delegations the signed-in user gave, each with
// a form that revokes it, and (with the built-in sign-in) a sign-out form.
// Server-rendered with the consent page's rules: no JavaScript, an inline
// style sheet allowed by a per-response nonce, forms posting only to the
// edge, never framed, and a CSRF token on every form.

const pathDelegations = "/oauth/delegations"

var userPageTmpl = template.Must(template.New("delegations").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Your delegations</title>
<style nonce="{{.Nonce}}">
body{font-family:system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#111}
code{word-break:break-all;background:#f3f3f3;padding:0 .2rem}
section{border:1px solid #ccc;padding:.5rem 1rem;margin:1rem 0}
dt{font-weight:600}
button{font-size:1rem;padding:.4rem 1rem}
</style></head>
<body><main>
<h1>Applications acting for you</h1>
<p>Signed in as <strong>{{.User}}</strong>. Your identity: <code>{{.UserDID}}</code></p>
{{if .Signout}}<form method="post" action="/oauth/logout"><input type="hidden" name="csrf" value="{{.CSRF}}"><button type="submit">Sign out</button></form>{{end}}
{{if not .Delegations}}<p>You have not allowed any application to act for you.</p>{{end}}
{{range $i, $d := .Delegations}}
<section aria-labelledby="d-{{$i}}">
<h2 id="d-{{$i}}">{{if $d.ClientName}}{{$d.ClientName}} <small>(name not verified)</small>{{else}}An unnamed application{{end}}</h2>
<dl>
<dt>Agent identity</dt><dd><code>{{$d.AgentDID}}</code></dd>
<dt>Permissions</dt><dd>{{if $d.Scopes}}{{range $j, $s := $d.Scopes}}{{if $j}}, {{end}}<code>{{$s}}</code>{{end}}{{else}}none{{end}}</dd>
<dt>For</dt><dd><code>{{$d.Resource}}</code></dd>
<dt>Allowed</dt><dd>{{$d.Created.Format "2006-01-02 15:04 MST"}}</dd>
<dt>Ends</dt><dd>{{$d.Expires.Format "2006-01-02 15:04 MST"}}</dd>
<dt>Last used</dt><dd>{{if $d.LastUse.IsZero}}not yet{{else}}{{$d.LastUse.Format "2006-01-02 15:04 MST"}}{{end}}</dd>
</dl>
<form method="post" action="/oauth/delegations">
<input type="hidden" name="csrf" value="{{$.CSRF}}">
<input type="hidden" name="family" value="{{$d.Family}}">
<button type="submit" name="revoke" value="1" aria-label="Revoke {{if $d.ClientName}}{{$d.ClientName}}{{else}}this application{{end}} ({{$d.AgentDID}})">Revoke</button>
</form>
</section>
{{end}}
</main></body></html>
`))

var signedOutTmpl = template.Must(template.New("signedout").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Signed out</title></head>
<body><main><h1>Signed out</h1><p>You are signed out of this site. The applications you allowed keep their delegations until you revoke them.</p></main></body></html>
`))

type userPageView struct {
	Nonce, User, UserDID, CSRF string
	Signout                    bool
	Delegations                []Delegation
}

// serveUserPages answers the user's page and the built-in sign-in's
// endpoints, and reports whether p was one of them.
func (s *Server) serveUserPages(w http.ResponseWriter, r *http.Request, p string) bool {
	switch {
	case p == pathDelegations:
		s.serveDelegations(w, r)
	case s.signIn != nil && p == pathLogin:
		s.serveLogin(w, r)
	case s.signIn != nil && p == pathCallback:
		s.serveCallback(w, r)
	case s.signIn != nil && p == pathLogout:
		s.serveLogout(w, r)
	default:
		return false
	}
	return true
}

// pageCSRF is the token of the user's page forms: a MAC of the user and
// the time, under a key of its own purpose.
func (s *Server) pageCSRF(user string, now time.Time) string {
	at := strconv.FormatInt(now.Unix(), 10)
	return at + "." + s.pageMAC(user, at)
}

func (s *Server) pageMAC(user, at string) string {
	return base64.RawURLEncoding.EncodeToString(mac(s.secrets.csrf, "user page", user, at))
}

func (s *Server) pageCSRFOK(tok, user string, now time.Time) bool {
	return timedMACOK(tok, now, func(at string) string { return s.pageMAC(user, at) })
}

// needUser answers a request without a signed-in user: to the login with
// the built-in sign-in, else a page saying the site's sign-in must guard
// this path.
func (s *Server) needUser(w http.ResponseWriter, r *http.Request) {
	if s.signIn != nil && r.Method == http.MethodGet {
		s.redirectToLogin(w, r)
		return
	}
	w.Header().Set("WWW-Authenticate", `Caddy-Route-Auth realm="sign in through this site's authentication"`)
	s.errorPage(w, r, http.StatusUnauthorized, "sign in first: this page needs the route's authentication (basic_auth, forward_auth, or the built-in sign_in) in front of it")
}

func (s *Server) serveDelegations(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		methodNotAllowed(w, "GET, POST")
		return
	}
	user := s.user(r)
	if user == "" {
		s.needUser(w, r)
		return
	}
	st, ok := s.users.st.(ListingStorage)
	if !ok {
		s.errorPage(w, r, http.StatusServiceUnavailable, "this edge's key storage cannot list your delegations; ask its operator")
		return
	}
	uid := s.users.opaqueID(user)
	if r.Method == http.MethodPost {
		s.revokeFromPage(w, r, st, user, uid)
		return
	}
	ds, err := ListDelegations(r.Context(), st, uid, time.Now())
	if err != nil {
		s.deps.Logger.Error("listing delegations", zapErr(err))
		if len(ds) == 0 {
			s.errorPage(w, r, http.StatusServiceUnavailable, "your delegations could not be read; try again shortly")
			return
		}
	}
	ds = DropRevoked(r.Context(), st, s.deps.Store, ds)
	WithLastUse(r.Context(), s.deps.Store, ds)
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	n := base64.RawStdEncoding.EncodeToString(nonce)
	v := userPageView{
		Nonce: n, User: s.userName(r, user), UserDID: userDID(s.issuer(r), uid), CSRF: s.pageCSRF(user, time.Now()),
		Signout: s.signIn != nil && s.deps.User(r) == "", Delegations: ds,
	}
	pageHeaders(w, "default-src 'none'; style-src 'nonce-"+n+"'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(http.StatusOK)
	_ = userPageTmpl.Execute(w, v)
}

// revokeFromPage takes a Revoke form: the family must be one of the
// signed-in user's own.
func (s *Server) revokeFromPage(w http.ResponseWriter, r *http.Request, st ListingStorage, user, uid string) {
	form, bad := readForm(w, r)
	if bad != "" {
		s.errorPage(w, r, http.StatusBadRequest, "the revocation form could not be read: "+bad)
		return
	}
	if !s.pageCSRFOK(form.Get("csrf"), user, time.Now()) {
		s.errorPage(w, r, http.StatusForbidden, "the form expired or was not made for you: reload your delegations page and try again")
		return
	}
	family := form.Get("family")
	if !validFamily(family) {
		s.errorPage(w, r, http.StatusBadRequest, "the form names no delegation: reload your delegations page")
		return
	}
	raw, err := st.Load(r.Context(), grantKey(uid, family))
	if err != nil {
		s.errorPage(w, r, http.StatusNotFound, "no such delegation of yours (already revoked or ended): reload your delegations page")
		return
	}
	var d Delegation
	_ = readStrict(raw, &d, "family")
	if err := RevokeDelegation(r.Context(), st, s.deps.Store, uid, family, time.Until(d.Expires)+time.Minute); err != nil {
		s.deps.Logger.Error("revoking from the user's page", zapErr(err))
		s.errorPage(w, r, http.StatusServiceUnavailable, "the delegation could not be revoked; try again shortly")
		return
	}
	s.revoked.forget(family)
	s.event(r, Event{Kind: "revoked", UserDID: d.UserDID, AgentDID: d.AgentDID, Scopes: d.Scopes})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, pathDelegations, http.StatusSeeOther)
}

// serveLogout ends the built-in sign-in's session (POST, with the page's
// CSRF token).
func (s *Server) serveLogout(w http.ResponseWriter, r *http.Request) {
	form, bad := readForm(w, r)
	if bad != "" {
		s.errorPage(w, r, http.StatusBadRequest, "sign out with the form on your delegations page: "+bad)
		return
	}
	sess, ok := s.session(r, time.Now())
	if ok && !s.pageCSRFOK(form.Get("csrf"), sess.Subject, time.Now()) {
		s.errorPage(w, r, http.StatusForbidden, "the form expired: reload your delegations page and sign out there")
		return
	}
	if ok {
		if err := s.endSession(r, sess); err != nil {
			s.deps.Logger.Error("sign-out not recorded", zapErr(err))
			s.errorPage(w, r, http.StatusServiceUnavailable, "signing out could not be recorded; try again shortly")
			return
		}
	}
	clearSession(w)
	pageHeaders(w, "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	w.WriteHeader(http.StatusOK)
	_ = signedOutTmpl.Execute(w, nil)
}
