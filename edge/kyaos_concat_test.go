package edge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestResponseProofWithholdsTwoDocuments: with response_proof sign, an
// upstream body of two JSON documents back to back is withheld (-32603),
// not the first one signed and the rest dropped, whether
// the upstream writes it in one piece or two.
func TestResponseProofWithholdsTwoDocuments(t *testing.T) {
	f := newFixture(t)
	const first = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a"}]}}`
	const second = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"EVIL"}]}}`
	for _, c := range []struct {
		name   string
		writes []string
	}{
		{"one write", []string{first + second}},
		{"newline between", []string{first + "\n" + second}},
		{"two writes", []string{first, second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := f.handler(t, func(c *setup) { c.Level = 2; c.ResponseProof = "sign" })
			rec := httptest.NewRecorder()
			r := prepareRequest(proofCall(t, f, signed(t, f.agent, testAudience, toolsCallBody)), newTestReplacer())
			if err := h.ServeNext(rec, r, func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("Content-Type", "application/json")
				for _, p := range c.writes {
					if _, err := io.WriteString(w, p); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			m := decodeRPC(t, rec.Body.Bytes())
			if m.Error == nil || m.Error.Code != -32603 || strings.Contains(rec.Body.String(), "response-proof") ||
				strings.Contains(rec.Body.String(), `"text"`) {
				t.Fatalf("HTTP %d %s, want the answer withheld (-32603)", rec.Code, rec.Body)
			}
		})
	}
	// One document and trailing whitespace is one answer: signed.
	h := f.handler(t, func(c *setup) { c.Level = 2; c.ResponseProof = "sign" })
	rec := httptest.NewRecorder()
	r := prepareRequest(proofCall(t, f, signed(t, f.agent, testAudience, toolsCallBody)), newTestReplacer())
	_ = h.ServeNext(rec, r, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, first+"\n")
		return err
	})
	if !strings.Contains(rec.Body.String(), "org.kya-os/response-proof") {
		t.Fatalf("one document not signed: %s", rec.Body)
	}
}
