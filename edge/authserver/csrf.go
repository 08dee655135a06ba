package authserver

import (
	"encoding/base64"
	"strconv"
	"time"
)

// The consent form's CSRF token is stateless: a MAC, under a key every
// replica shares, of the signed-in user, every parameter of the request
// the form answers, and the time it was made. Another site cannot make
// one, a form made for one user is refused for another, and a form cannot
// be reused for other parameters (another client, redirect or scope set).
const csrfLifetime = 10 * time.Minute

func (s *Server) csrfMAC(c checked, at string) string {
	q := c.req
	return base64.RawURLEncoding.EncodeToString(mac(s.secrets.csrf, c.user, q.ClientID, q.RedirectURI, q.State,
		q.Challenge, q.ChallengeMethod, q.Scope, q.Resource, q.DPoPJKT, q.ResponseType, at))
}

func (s *Server) csrfToken(c checked, now time.Time) string {
	at := strconv.FormatInt(now.Unix(), 10)
	return at + "." + s.csrfMAC(c, at)
}

func (s *Server) csrfOK(tok string, c checked, now time.Time) bool {
	return timedTokenOK(tok, now, func(at string) string { return s.csrfMAC(c, at) })
}
