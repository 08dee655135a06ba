package authserver

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// The built-in sign-in's session: a cookie sealed (AES-256-GCM) under a key
// every replica derives from the shared secret, so any replica reads it
// and nobody else can make or change one. It holds the login subject, the
// name to show, a random id and its expiry; an expired or altered cookie
// is no session. Signing out records the id in the shared store until the
// cookie would expire, so a copy of the cookie dies with the sign-out on
// every replica. Only the sign-in pages read the session, never the MCP
// path, so that lookup is rare.

const (
	signedOutPrefix = "oauth-signed-out:"
	sessionCookie   = "__Host-mcpi-session"
	maxCookieLen    = 2048
)

type session struct {
	Subject string `json:"s"`
	Name    string `json:"n,omitempty"`
	ID      string `json:"i"`
	Expires int64  `json:"e"` // Unix seconds
}

type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, errors.New("authserver: session key must be 32 bytes")
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: a}, nil
}

// seal encrypts v with aad as associated data (the cookie's name and
// where it is valid), so a value made for one cookie or site is refused as
// another.
func (s *sealer) seal(aad string, v []byte) string {
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, v, []byte(aad)))
}

func (s *sealer) open(aad, v string) ([]byte, bool) {
	if len(v) > maxCookieLen {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) < s.aead.NonceSize()+s.aead.Overhead() {
		return nil, false
	}
	n := s.aead.NonceSize()
	out, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(aad))
	return out, err == nil
}

// cookieAAD binds a sealed cookie to its name, the site (origin) and the
// identity provider: a session made on one site of the edge, or under
// another provider's configuration, is refused on another, even though
// every site sharing the storage derives the same key.
func (s *Server) cookieAAD(r *http.Request, name string) string {
	return name + " " + s.issuer(r) + " " + s.signIn.cfg.Issuer
}

func (s *Server) setSession(w http.ResponseWriter, r *http.Request, sess session) {
	life := s.signIn.cfg.SessionLifetime
	sess.Expires = time.Now().Add(life).Unix()
	sess.ID = randomToken()
	b, _ := json.Marshal(sess)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.signIn.seal.seal(s.cookieAAD(r, sessionCookie), b), Path: "/",
		MaxAge: int(life / time.Second), Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

func clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// session returns the request's live session, if it has one.
func (s *Server) session(r *http.Request, now time.Time) (session, bool) {
	if s.signIn == nil {
		return session{}, false
	}
	var sess session
	found := false
	for _, c := range r.Cookies() {
		if c.Name != sessionCookie {
			continue
		}
		if found {
			return session{}, false // two: one may be planted
		}
		found = true
		raw, ok := s.signIn.seal.open(s.cookieAAD(r, sessionCookie), c.Value)
		if !ok || readStrict(raw, &sess, "s", "n", "i", "e") != nil || sess.Subject == "" || sess.ID == "" {
			return session{}, false
		}
	}
	if !found || now.Unix() >= sess.Expires {
		return session{}, false
	}
	// Signed out, or the store cannot tell: no session.
	if _, err := s.deps.Store.Lookup(r.Context(), digest(signedOutPrefix, sess.ID)); !errors.Is(err, challenge.ErrBindingNotFound) {
		return session{}, false
	}
	return sess, true
}

// endSession records that sess was signed out, until it would expire.
func (s *Server) endSession(r *http.Request, sess session) error {
	ttl := time.Until(time.Unix(sess.Expires, 0)) + time.Minute
	return s.deps.Store.Bind(r.Context(), digest(signedOutPrefix, sess.ID), []byte{1}, ttl)
}

// user is the signed-in user's login subject: the host's authentication
// first, else the built-in sign-in's session.
func (s *Server) user(r *http.Request) string {
	if u := s.deps.User(r); u != "" {
		return u
	}
	if sess, ok := s.session(r, time.Now()); ok {
		return sess.Subject
	}
	return ""
}

// userName is what the pages call the signed-in user.
func (s *Server) userName(r *http.Request, subject string) string {
	if sess, ok := s.session(r, time.Now()); ok && sess.Subject == subject && sess.Name != "" {
		return sess.Name
	}
	return subject
}

func macEqualString(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
