package authserver

import (
	"crypto/hmac"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// The consent form's CSRF token is stateless: a MAC, under a key every
// replica shares, of the signed-in user, every parameter of the request
// the form answers, and the time it was made. Another site cannot make
// one, a form made for one user is refused for another, and a form cannot
// be reused for other parameters (another client, redirect or scope set).
// A form is answered once: its token is then recorded in the shared store.
const csrfLifetime = 10 * time.Minute

func (s *Server) csrfMAC(c checked, at, nonce string) string {
	q := c.req
	return base64.RawURLEncoding.EncodeToString(mac(s.secrets.csrf, c.user, q.ClientID, q.RedirectURI, q.State,
		q.Challenge, q.ChallengeMethod, q.Scope, q.Resource, q.DPoPJKT, q.ResponseType, at, nonce))
}

// csrfToken is <time>.<nonce>.<MAC>: the nonce makes every form's token
// its own, so that answering one form spends only that form.
func (s *Server) csrfToken(c checked, now time.Time) string {
	at := strconv.FormatInt(now.Unix(), 10)
	nonce := randomToken()[:16]
	return at + "." + nonce + "." + s.csrfMAC(c, at, nonce)
}

func (s *Server) csrfOK(tok string, c checked, now time.Time) bool {
	at, rest, ok := strings.Cut(tok, ".")
	if !ok || len(tok) > 128 {
		return false
	}
	nonce, _, ok := strings.Cut(rest, ".")
	if !ok || nonce == "" || strings.Contains(nonce, ".") {
		return false
	}
	// timedMACOK reads "<time>.<MAC>": the nonce travels inside the MAC's
	// part, checked by the MAC itself.
	return timedMACOK(at+"."+rest[len(nonce)+1:], now, func(at string) string { return s.csrfMAC(c, at, nonce) })
}

// timedMACOK checks a token "<unix time>.<MAC>" made within csrfLifetime
// (and at most a minute ahead, for clock skew between replicas), whose MAC
// for that time is mk(at).
func timedMACOK(tok string, now time.Time, mk func(at string) string) bool {
	at, sum, ok := strings.Cut(tok, ".")
	if !ok || len(tok) > 128 || strings.Contains(sum, ".") {
		return false
	}
	t, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return false
	}
	made := time.Unix(t, 0)
	if now.Before(made.Add(-time.Minute)) || now.After(made.Add(csrfLifetime)) {
		return false
	}
	return hmac.Equal([]byte(sum), []byte(mk(at)))
}
