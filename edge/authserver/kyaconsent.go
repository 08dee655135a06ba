package authserver

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// The agent consent page: what a KYA-OS prompt links to. GET shows what
// the agent asks for; POST (approve or deny, CSRF-checked) answers. Same
// page rules as the OAuth consent page: no JavaScript, a nonce'd inline
// style, no framing, the form posting only to the edge.

// It is served at the authorization endpoint, which the route's
// authentication already guards: a request whose query holds the
// consent link's MAC (GET) or kya_consent (the form's POST) is one for it.
const agentConsentAction = pathAuthorize + "?kya_consent=1"

// isAgentConsent reports whether r is for the agent consent page.
func isAgentConsent(r *http.Request) bool {
	q := r.URL.Query()
	return q.Has(ticketMACParam) || q.Has("kya_consent")
}

var agentConsentTmpl = template.Must(template.New("agent-consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Allow an agent to act for you?</title>
<style nonce="{{.Nonce}}">
body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#111}
code{word-break:break-all;background:#f3f3f3;padding:0 .2rem}
li{margin:.3rem 0}
button{font-size:1rem;padding:.5rem 1.2rem;margin-right:1rem}
</style></head>
<body><main>
<h1>Allow an agent to act for you</h1>
<p>The agent <code>{{.AgentDID}}</code> asks to {{if .Tool}}call <code>{{.Tool}}</code> on{{else}}use{{end}} <code>{{.Origin}}</code> on your behalf, signed in as <strong>{{.User}}</strong>.</p>
<dl>
<dt>It asks for</dt><dd><ul>{{range .Missing}}<li><code>{{.}}</code></li>{{end}}</ul></dd>
{{if .Held}}<dt>It keeps what it already holds</dt><dd><ul>{{range .Held}}<li><code>{{.}}</code></li>{{end}}</ul></dd>{{end}}
<dt>Your identity (issuer of the delegation)</dt><dd><code>{{.UserDID}}</code></dd>
<dt>The delegation lasts</dt><dd>{{.Lifetime}}</dd>
</dl>
<form method="post" action="` + agentConsentAction + `">
{{range .Hidden}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">
{{end}}<input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" name="approve" value="1">Allow</button>
<button type="submit" name="deny" value="1">Deny</button>
</form>
</main></body></html>
`))

var agentDoneTmpl = template.Must(template.New("agent-done").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.}}</title></head>
<body><main id="agent-consent-done"><h1>{{.}}</h1><p>You can close this page and return to your agent.</p></main></body></html>
`))

type agentConsentView struct {
	Nonce, AgentDID, Tool, Origin, User, UserDID, Lifetime, CSRF string
	Missing, Held                                                []string
	Hidden                                                       []hiddenField
}

// The form's CSRF token is a MAC of the signed-in user, the ticket and
// the time, as the OAuth consent form's.
func (s *Server) agentCSRFMAC(t ticket, user string, at string) []byte {
	return mac(s.secrets.csrf, "agent consent form", user, string(s.ticketMAC(t)), at)
}

func (s *Server) agentCSRFOK(tok string, t ticket, user string, now time.Time) bool {
	return timedMACOK(tok, now, func(at string) string { return encodeMAC(s.agentCSRFMAC(t, user, at)) })
}

// serveAgentConsent shows the agent consent page (GET) or takes its
// answer (POST).
func (s *Server) serveAgentConsent(w http.ResponseWriter, r *http.Request) {
	var v url.Values
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		v = r.URL.Query()
	case http.MethodPost:
		if !s.readConsentForm(w, r) {
			return
		}
		v = r.PostForm
	default:
		methodNotAllowed(w, "GET, POST")
		return
	}
	// As the OAuth consent page: the route's authentication first, else
	// the built-in sign-in, whose login brings the browser back here.
	user := s.user(r)
	if user == "" {
		s.needUser(w, r)
		return
	}
	now := time.Now()
	t, err := s.readTicket(v, now)
	if err != nil {
		status := http.StatusBadRequest
		if err == errTicketExpired {
			status = http.StatusGone
		}
		s.errorPage(w, r, status, err.Error())
		return
	}
	if r.Method != http.MethodPost {
		s.showAgentConsent(w, r, t, v, user, now)
		return
	}
	if !s.agentCSRFOK(v.Get("csrf"), t, user, now) {
		s.errorPage(w, r, http.StatusForbidden, "the consent form expired or was not made for you: open the agent's link again")
		return
	}
	uid := s.users.opaqueID(user)
	did := userDID(s.issuer(r), uid)
	if v.Has("deny") || !v.Has("approve") {
		s.event(r, Event{Kind: "consent_denied", UserDID: did, AgentDID: t.AgentDID})
		s.donePage(w, http.StatusOK, "You denied the agent's request")
		return
	}
	if err := s.approve(r, t, uid, now); err != nil {
		switch {
		case errors.Is(err, errLinkAnswered):
			s.errorPage(w, r, http.StatusConflict, err.Error())
			return
		case errors.Is(err, errTooManyDelegations):
			s.errorPage(w, r, http.StatusConflict, "you already have "+strconv.Itoa(MaxDelegationsPerUser)+
				" live delegations: revoke one at "+pathDelegations+", then ask the agent to call the tool again for a new link")
			return
		}
		s.deps.Logger.Warn("agent consent not kept", zapErr(err))
		s.errorPage(w, r, http.StatusServiceUnavailable, "your approval could not be stored: ask the agent to call the tool again for a new link, shortly")
		return
	}
	s.event(r, Event{Kind: "consent_approved", UserDID: did, AgentDID: t.AgentDID, Scopes: t.Grant})
	s.event(r, Event{Kind: "issued", UserDID: did, AgentDID: t.AgentDID, Scopes: t.Grant})
	s.donePage(w, http.StatusOK, "You allowed the agent")
}

func (s *Server) showAgentConsent(w http.ResponseWriter, r *http.Request, t ticket, v url.Values, user string, now time.Time) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	n := base64.RawStdEncoding.EncodeToString(nonce)
	view := agentConsentView{
		Nonce: n, AgentDID: t.AgentDID, Tool: t.Tool, Origin: s.issuer(r), User: s.userName(r, user),
		UserDID: userDID(s.issuer(r), s.users.opaqueID(user)), Lifetime: s.cfg.CredentialLifetime.String(),
		Missing: t.Missing,
	}
	for _, g := range t.Grant {
		if !slices.Contains(t.Missing, g) {
			view.Held = append(view.Held, g)
		}
	}
	at := strconv.FormatInt(now.Unix(), 10)
	view.CSRF = at + "." + encodeMAC(s.agentCSRFMAC(t, user, at))
	for _, p := range append(slices.Clone(ticketParams), ticketMACParam) {
		view.Hidden = append(view.Hidden, hiddenField{p, v.Get(p)})
	}
	pageHeaders(w, "default-src 'none'; style-src 'nonce-"+n+"'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(http.StatusOK)
	_ = agentConsentTmpl.Execute(w, view)
}

func (s *Server) donePage(w http.ResponseWriter, status int, msg string) {
	pageHeaders(w, "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	w.WriteHeader(status)
	_ = agentDoneTmpl.Execute(w, msg)
}
