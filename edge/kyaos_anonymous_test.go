package edge

import (
	"net/http"
	"testing"
)

// TestAnonymousToolUnderRequestProof: a tool that needs no credential is
// still under request_proof. Under required, no proof is refused
// (proof_missing) and a valid one, by any agent, admits; under optional a
// proof present must be valid. Nothing refused reaches the upstream.
func TestAnonymousToolUnderRequestProof(t *testing.T) {
	f := newFixture(t)
	stranger := newParty(t)
	call := polCall(3, "public")
	for _, c := range []struct {
		name, mode, body string
		status           int
		reason           string
	}{
		{"required, none", "required", call, http.StatusUnauthorized, "proof_missing"},
		{"required, valid", "required", signed(t, stranger, testAudience, call), http.StatusOK, ""},
		{"required, wrong audience", "required", signed(t, stranger, "did:web:other.example", call), http.StatusUnauthorized, "proof_invalid"},
		{"optional, none", "optional", call, http.StatusOK, ""},
		{"optional, wrong audience", "optional", signed(t, stranger, "did:web:other.example", call), http.StatusUnauthorized, "proof_invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := polHandler(t, f, func(h *Handler) { h.RequestProof = c.mode })
			res := polServe(t, h, polPost(c.body, ""), nil)
			if res.rec.Code != c.status || res.called != (c.status == http.StatusOK) {
				t.Fatalf("%d forwarded %v: %s", res.rec.Code, res.called, res.rec.Body)
			}
			if c.reason != "" && decodeProofRPC(t, res.rec).Error.Data.Reason != c.reason {
				t.Fatalf("%s", res.rec.Body)
			}
			if c.status == http.StatusOK && string(res.fwdBody) != c.body {
				t.Fatalf("body edited: %s", res.fwdBody)
			}
		})
	}
}
