package mcpiverify

import (
	"encoding/json"
	"errors"
	"net/http"
)

// Middleware verifies X-Verified-Delegation on every request and calls next
// with the Identity in the request context (FromContext). Requests without
// the header (unless Optional), with an invalid one, or whose X-Agent-DID or
// X-User-DID headers disagree with it are rejected with 401 and a JSON body;
// 503 when the edge's keys cannot be fetched.
//
// Middleware panics if the options are invalid (a missing WithJWKSURL or
// WithAudience), like regexp.MustCompile; use NewVerifier and
// Verifier.Wrap to handle the error instead.
func Middleware(next http.Handler, opts ...Option) http.Handler {
	v, err := NewVerifier(opts...)
	if err != nil {
		panic(err)
	}
	return v.Wrap(next)
}

// Wrap returns the middleware around next (see Middleware).
func (v *Verifier) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values := r.Header.Values(HeaderVerifiedDelegation)
		if len(values) == 0 && v.optional {
			// Nothing vouches for these: do not let the handler trust them.
			r.Header.Del(HeaderAgentDID)
			r.Header.Del(HeaderUserDID)
			next.ServeHTTP(w, r)
			return
		}
		id, err := v.verifyRequest(r, values)
		if err != nil {
			v.onError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), id)))
	})
}

func (v *Verifier) verifyRequest(r *http.Request, values []string) (*Identity, error) {
	if len(values) > 1 {
		return nil, ErrMalformed
	}
	token := ""
	if len(values) == 1 {
		token = values[0]
	}
	id, err := v.Verify(r.Context(), token)
	if err != nil {
		return nil, err
	}
	if !headerMatches(r.Header, HeaderAgentDID, id.AgentDID) || !headerMatches(r.Header, HeaderUserDID, id.UserDID) {
		return nil, ErrHeaderMismatch
	}
	return id, nil
}

// headerMatches: the header is absent, or present once with value want.
func headerMatches(h http.Header, name, want string) bool {
	vs := h.Values(name)
	return len(vs) == 0 || (len(vs) == 1 && vs[0] == want)
}

// writeError is the default rejection: 401 (503 when the keys are
// unavailable) with {"error", "error_description", "reason"}.
func writeError(w http.ResponseWriter, _ *http.Request, err error) {
	status, code := http.StatusUnauthorized, "invalid_token"
	if errors.Is(err, ErrJWKSUnavailable) {
		status, code = http.StatusServiceUnavailable, "temporarily_unavailable"
	}
	desc := "verified delegation invalid"
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			desc = r.err.Error()
			break
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{
		"error":             code,
		"error_description": desc,
		"reason":            Reason(err),
	})
}
