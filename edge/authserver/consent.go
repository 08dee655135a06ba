package authserver

import (
	"crypto/rand"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// The consent page: server-rendered, no JavaScript, no external assets.
// Its one style sheet is inline, allowed by a per-response nonce; the page
// may not be framed, and the form may post only to the edge, then
// redirect to the client (browsers apply form-action to that redirect).

var consentTmpl = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Allow an application to act for you?</title>
<style nonce="{{.Nonce}}">
body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#111}
.unverified{color:#8a4b00;font-weight:600;border:1px solid #8a4b00;padding:0 .3rem;white-space:nowrap}
code{word-break:break-all;background:#f3f3f3;padding:0 .2rem}
fieldset{border:1px solid #ccc;padding:.5rem 1rem;margin:1rem 0}
li{margin:.3rem 0}
button{font-size:1rem;padding:.5rem 1.2rem;margin-right:1rem}
</style></head>
<body><main>
<h1>Allow an application to act for you</h1>
<p>An application that calls itself <strong>{{.ClientName}}</strong>&nbsp;<span class="unverified">(name not verified)</span> asks to use the MCP services of <code>{{.Host}}</code>
on your behalf, signed in as <strong>{{.User}}</strong>. Anyone can give an application any name.</p>
<dl>
<dt>Where it will use them</dt><dd>every MCP service of <code>{{.Host}}</code>; it asked for <code>{{.Resource}}</code></dd>
<dt>It will receive the answer at</dt><dd><code>{{.RedirectHost}}</code></dd>
<dt>Agent identity</dt><dd><code>{{.AgentDID}}</code></dd>
<dt>Your identity (issuer of the delegation)</dt><dd><code>{{.UserDID}}</code></dd>
<dt>Each credential lasts</dt><dd>{{.Lifetime}}; it is renewed until you revoke it, for at most {{.RefreshLifetime}}</dd>
</dl>
<form method="post" action="/oauth/authorize">
{{range .Hidden}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">
{{end}}<input type="hidden" name="csrf" value="{{.CSRF}}">
<fieldset><legend>Permissions (untick what you do not want to give)</legend>
{{if not .Scopes}}<p>No permissions: the application may call only what needs none.</p>{{end}}
<ul>{{range $i, $s := .Scopes}}
<li><input type="checkbox" id="scope-{{$i}}" name="scope" value="{{$s.Name}}" checked>
<label for="scope-{{$i}}"><code>{{$s.Name}}</code>{{if $s.Tools}}: opens {{range $j, $t := $s.Tools}}{{if $j}}, {{end}}<code>{{$t}}</code>{{end}}{{end}}</label></li>
{{end}}</ul></fieldset>
<button type="submit" name="approve" value="1">Allow</button>
<button type="submit" name="deny" value="1">Deny</button>
</form>
</main></body></html>
`))

var errorTmpl = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorization failed</title></head>
<body><main><h1>Authorization failed</h1><p>{{.}}</p></main></body></html>
`))

type hiddenField struct{ Name, Value string }

type consentView struct {
	Nonce, ClientName, Resource, Host, User, RedirectHost, AgentDID, UserDID string
	Lifetime, RefreshLifetime                                                string
	Hidden                                                                   []hiddenField
	CSRF                                                                     string
	Scopes                                                                   []Scope
}

func (s *Server) showConsent(w http.ResponseWriter, r *http.Request, c checked) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	n := base64.RawStdEncoding.EncodeToString(nonce)
	ru, _ := url.Parse(c.req.RedirectURI)
	name := c.client.Name
	if name == "" {
		name = "An unnamed application"
	}
	agent := s.clientAgentDID(c.client.ID)
	if c.req.DPoPJKT != "" {
		agent = "the did:jwk of the key the application proves (DPoP thumbprint " + c.req.DPoPJKT + ")"
	}
	v := consentView{
		Nonce: n, ClientName: name, Resource: c.resource, Host: hostOf(s.issuer(r)), User: s.userName(r, c.user), RedirectHost: ru.Host,
		AgentDID: agent, UserDID: userDID(s.issuer(r), s.users.opaqueID(c.user)),
		Lifetime: humanDuration(s.cfg.CredentialLifetime), RefreshLifetime: humanDuration(s.cfg.RefreshLifetime),
		CSRF: s.csrfToken(c, time.Now()),
	}
	q := c.req
	for _, f := range []hiddenField{
		{"response_type", q.ResponseType}, {"client_id", q.ClientID}, {"redirect_uri", q.RedirectURI},
		{"state", q.State}, {"code_challenge", q.Challenge}, {"code_challenge_method", q.ChallengeMethod},
		{"requested_scope", q.Scope}, {"resource", q.Resource}, {"dpop_jkt", q.DPoPJKT},
	} {
		if f.Value != "" {
			v.Hidden = append(v.Hidden, f)
		}
	}
	for _, sc := range c.scopes {
		v.Scopes = append(v.Scopes, s.scopes[sc])
	}
	ru.Path, ru.RawQuery = "", ""
	pageHeaders(w, "default-src 'none'; style-src 'nonce-"+n+"'; form-action 'self' "+ru.Scheme+"://"+ru.Host+"; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(http.StatusOK)
	_ = consentTmpl.Execute(w, v)
}

// hostOf is the host[:port] of origin.
func hostOf(origin string) string {
	_, h, _ := strings.Cut(origin, "://")
	return h
}

// humanDuration says d as a person would: "1 hour", "30 days", "90
// minutes", in the largest unit that divides it.
func humanDuration(d time.Duration) string {
	n, unit := int64(d/time.Second), "second"
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}} {
		if d >= u.d && d%u.d == 0 {
			n, unit = int64(d/u.d), u.name
			break
		}
	}
	if n != 1 {
		unit += "s"
	}
	return strconv.FormatInt(n, 10) + " " + unit
}

// errorPage shows an error to the user, never to the client's redirect.
func (s *Server) errorPage(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	pageHeaders(w, "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	w.WriteHeader(status)
	_ = errorTmpl.Execute(w, msg)
}

func pageHeaders(w http.ResponseWriter, csp string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

func zapErr(err error) zap.Field { return zap.Error(err) }
