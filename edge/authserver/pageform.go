package authserver

import (
	"net/http"
	"strings"
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
