package authserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// authzRequest is an authorization request (RFC 6749 §4.1.1 with PKCE,
// RFC 8707 resource and RFC 9449 dpop_jkt), read from the query of the
// GET that shows the consent page and again from the form it posts.
type authzRequest struct {
	ResponseType, ClientID, RedirectURI, State string
	Challenge, ChallengeMethod                 string
	Scope, Resource, DPoPJKT                   string
}

var authzParams = []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "scope", "resource", "dpop_jkt"}

// maxParamLen bounds one parameter (a client_id holds a registration).
const maxParamLen = 8 << 10

// readAuthz reads the request from v; a parameter given twice, or too
// long, is an error (RFC 6749 §3.1).
func readAuthz(v url.Values) (authzRequest, string) {
	for _, p := range authzParams {
		if len(v[p]) > 1 {
			return authzRequest{}, p + " is given more than once"
		}
		if len(v.Get(p)) > maxParamLen {
			return authzRequest{}, p + " is too long"
		}
	}
	return authzRequest{
		ResponseType: v.Get("response_type"), ClientID: v.Get("client_id"), RedirectURI: v.Get("redirect_uri"),
		State: v.Get("state"), Challenge: v.Get("code_challenge"), ChallengeMethod: v.Get("code_challenge_method"),
		Scope: v.Get("scope"), Resource: v.Get("resource"), DPoPJKT: v.Get("dpop_jkt"),
	}, ""
}

// checked is an authorization request that passed every check.
type checked struct {
	req      authzRequest
	client   client
	scopes   []string // requested, in the route's order
	resource string
	user     string // the signed-in login subject
}

// check validates q for the signed-in user. Errors about the client or
// its redirect URI are shown to the user (page=true), never sent to a
// redirect URI that may not be the client's; the others go back to the
// client.
func (s *Server) check(r *http.Request, q authzRequest) (c checked, status int, code, desc string, page bool) {
	c.req = q
	c.user = s.user(r)
	if c.user == "" {
		return c, http.StatusUnauthorized, "login_required", "sign in first: the authorization endpoint needs the route's authentication (basic_auth, forward_auth, …) in front of it", true
	}
	if q.ClientID == "" {
		return c, http.StatusBadRequest, "invalid_request", "client_id is missing", true
	}
	cl, err := s.lookupClient(r.Context(), q.ClientID)
	if err != nil {
		return c, http.StatusBadRequest, "invalid_client", err.Error(), true
	}
	c.client = cl
	if q.RedirectURI == "" && len(cl.RedirectURIs) == 1 {
		c.req.RedirectURI = cl.RedirectURIs[0]
	}
	if !cl.redirectAllowed(c.req.RedirectURI) {
		return c, http.StatusBadRequest, "invalid_request", "redirect_uri is not one the client registered (it must match exactly)", true
	}
	if q.ResponseType != "code" {
		return c, 0, "unsupported_response_type", "response_type must be code", false
	}
	switch {
	case q.Challenge == "":
		return c, 0, "invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256", false
	case q.ChallengeMethod != "S256":
		return c, 0, "invalid_request", "code_challenge_method must be S256 (plain is not accepted)", false
	case !validChallenge(q.Challenge):
		return c, 0, "invalid_request", "code_challenge must be the base64url SHA-256 of the verifier (43 characters)", false
	}
	if q.DPoPJKT != "" && (len(q.DPoPJKT) != 43 || strings.Trim(q.DPoPJKT, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "") {
		return c, 0, "invalid_request", "dpop_jkt must be a base64url SHA-256 JWK thumbprint", false
	}
	scopes, bad := s.requestedScopes(q.Scope)
	if bad != "" {
		return c, 0, "invalid_scope", "scope " + bad + " is not a scope of this resource (see scopes_supported)", false
	}
	c.scopes = scopes
	res, desc := s.checkResource(r, q.Resource)
	if desc != "" {
		return c, 0, "invalid_target", desc, false
	}
	c.resource = res
	return c, 0, "", "", false
}

// requestedScopes are the scopes asked for, every scope of the route when
// none is; an unknown one is returned as bad.
func (s *Server) requestedScopes(scope string) (out []string, bad string) {
	fields := strings.Fields(scope)
	if len(fields) == 0 {
		return s.ScopesSupported(), ""
	}
	for _, f := range fields {
		if _, ok := s.scopes[f]; !ok {
			return nil, f
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, ""
}

// maxResourcePath bounds the path of a resource.
const maxResourcePath = 200

// checkResource checks an RFC 8707 resource: a URL on this edge's own
// origin whose path is plain (letters, digits, "-._~/"), without query,
// fragment or user info, so that the consent page shows an address the
// user can read and not text the client chose. Without one, the origin.
// The credential is bound to the host, not to this path (the edge's
// audience check is per host): the page says so.
func (s *Server) checkResource(r *http.Request, res string) (string, string) {
	origin := s.issuer(r)
	if res == "" {
		return origin, ""
	}
	u, err := url.Parse(res)
	if err != nil || u.Fragment != "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Opaque != "" ||
		!strings.EqualFold(u.Scheme+"://"+u.Host, origin) || !plainPath(u.Path) || u.RawPath != "" {
		return "", "resource must be the URL of an MCP endpoint of this edge (" + origin + "/path, the path of letters, digits and -._~/ only, at most 200 characters), without query or fragment"
	}
	return res, ""
}

func plainPath(p string) bool {
	return len(p) <= maxResourcePath && (p == "" || p[0] == '/') &&
		strings.Trim(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/") == ""
}

// serveAuthorize shows the consent page (GET) or takes its answer (POST).
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	var v url.Values
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		v = r.URL.Query()
	case http.MethodPost:
		if !s.readConsentForm(w, r) {
			return
		}
		// The checkboxes post the ticked scopes as "scope"; the scope of
		// the request the form answers travels as "requested_scope".
		v = url.Values{}
		for k, vs := range r.PostForm {
			v[k] = vs
		}
		v["scope"] = r.PostForm["requested_scope"]
		delete(v, "requested_scope")
	default:
		methodNotAllowed(w, "GET, POST")
		return
	}
	q, bad := readAuthz(v)
	if bad != "" {
		s.errorPage(w, r, http.StatusBadRequest, bad)
		return
	}
	c, status, code, desc, page := s.check(r, q)
	switch {
	case page && code != "":
		if status == http.StatusUnauthorized && s.signIn != nil && r.Method == http.MethodGet {
			s.redirectToLogin(w, r)
			return
		}
		if status == http.StatusUnauthorized {
			// Not Basic: the edge checks no password itself, and a
			// browser prompt would only loop. The route's authentication
			// is what signs the user in.
			w.Header().Set("WWW-Authenticate", `Caddy-Route-Auth realm="sign in through this site's authentication"`)
		}
		s.errorPage(w, r, status, desc)
		return
	case code != "":
		s.redirectError(w, r, c.req, code, desc)
		return
	}
	if r.Method != http.MethodPost {
		s.showConsent(w, r, c)
		return
	}
	s.answerConsent(w, r, c, r.PostForm)
}

// answerConsent takes the consent form: deny, or approve the ticked scopes.
func (s *Server) answerConsent(w http.ResponseWriter, r *http.Request, c checked, form url.Values) {
	if !s.csrfOK(form.Get("csrf"), c, time.Now()) {
		s.errorPage(w, r, http.StatusForbidden, "the consent form expired or was not made for you: go back to your application and start again")
		return
	}
	uid := s.users.opaqueID(c.user)
	did := userDID(s.issuer(r), uid)
	if form.Has("deny") || !form.Has("approve") {
		s.event(r, Event{Kind: "consent_denied", ClientID: c.client.ID, UserDID: did})
		s.redirectError(w, r, c.req, "access_denied", "the user denied the request")
		return
	}
	// A form answers once: posted twice it would make two codes, and two
	// refresh families, from one consent.
	if err := s.deps.Store.Put(r.Context(), digest("oauth-csrf:", form.Get("csrf")), challenge.Record{Challenge: "answered", IssuedAt: time.Now(), ExpiresAt: time.Now().Add(csrfLifetime + time.Minute)}, csrfLifetime+time.Minute); err != nil {
		if errors.Is(err, challenge.ErrNonceExists) {
			s.errorPage(w, r, http.StatusForbidden, "this consent form was already answered: go back to your application and start again")
			return
		}
		s.deps.Logger.Warn("consent form not recorded", zapErr(err))
		s.errorPage(w, r, http.StatusServiceUnavailable, "the shared store is unavailable: go back to your application and start again shortly")
		return
	}
	// Only scopes that were asked for and are still ticked.
	var granted []string
	for _, sc := range c.scopes {
		if slices.Contains(form["scope"], sc) {
			granted = append(granted, sc)
		}
	}
	// The user's key exists from the first consent on.
	if _, err := s.users.key(r.Context(), uid, true); err != nil {
		s.deps.Logger.Error("user key", zapErr(err))
		s.errorPage(w, r, http.StatusServiceUnavailable, "your signing key could not be stored; try again shortly")
		return
	}
	g := grant{
		ClientID: c.client.ID, RedirectURI: c.req.RedirectURI, Challenge: c.req.Challenge,
		UserID: uid, Scopes: granted, Resource: c.resource, Origin: s.issuer(r), JKT: c.req.DPoPJKT,
	}
	if s.deps.EdgeAudience != nil {
		g.EdgeAudience = s.deps.EdgeAudience(r)
	}
	code := randomToken()
	body, _ := json.Marshal(g)
	now := time.Now()
	rec := challenge.Record{Challenge: string(body), IssuedAt: now, ExpiresAt: now.Add(codeLifetime)}
	if err := s.deps.Store.Put(r.Context(), digest("oauth-code:", code), rec, codeLifetime); err != nil {
		s.deps.Logger.Warn("authorization code not stored", zapErr(err))
		s.redirectError(w, r, c.req, "temporarily_unavailable", "the shared store is unavailable; retry")
		return
	}
	s.event(r, Event{Kind: "consent_approved", ClientID: c.client.ID, UserDID: did, Scopes: granted})
	s.redirect(w, c.req, url.Values{"code": {code}}, s.issuer(r))
}

// redirectError sends an error back to the client's (checked) redirect URI.
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, q authzRequest, code, desc string) {
	s.redirect(w, q, url.Values{"error": {code}, "error_description": {desc}}, s.issuer(r))
}

// redirect answers 302 to the redirect URI with v, state and iss (RFC 9207).
func (s *Server) redirect(w http.ResponseWriter, q authzRequest, v url.Values, iss string) {
	u, _ := url.Parse(q.RedirectURI) // checked at registration
	qv := u.Query()
	for k, vs := range v {
		qv[k] = vs
	}
	if q.State != "" {
		qv.Set("state", q.State)
	}
	qv.Set("iss", iss)
	u.RawQuery = qv.Encode()
	h := w.Header()
	h.Set("Location", u.String())
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusFound)
}
