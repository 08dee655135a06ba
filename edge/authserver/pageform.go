package authserver

import (
	"crypto/hmac"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// What the consent pages share: reading a posted form and checking the
// timed CSRF token they carry.

// readConsentForm reads the form a consent page posted, bounded; on an
// error it shows the error page and reports false.
func (s *Server) readConsentForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		s.errorPage(w, r, http.StatusUnsupportedMediaType, "the consent form must be posted as application/x-www-form-urlencoded")
		return false
	}
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "the consent form could not be read")
		return false
	}
	return true
}

// timedTokenOK checks a CSRF token "<unix time>.<base64url MAC>": made at
// most csrfLifetime ago (and not more than a minute ahead), its MAC the one
// want computes (base64url) for that time.
func timedTokenOK(tok string, now time.Time, want func(at string) string) bool {
	at, sum, ok := strings.Cut(tok, ".")
	if !ok || len(tok) > 128 {
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
	return hmac.Equal([]byte(sum), []byte(want(at)))
}
