package edge

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestProofNamedAmbiguously: under request_proof optional
// (the default) and required, a proof present is read and refused when
// invalid, whatever it is named or sent as. A proof key spelt in another
// case (or with K/ſ), the canonical and legacy keys together, and a
// "_Meta" are refused as ambiguous bodies (400, -32600), with or without
// a tool policy; a POST sent under another Content-Type than JSON is
// refused 415 before its proof is read. Nothing refused reaches the
// upstream.
func TestProofNamedAmbiguously(t *testing.T) {
	f := newFixture(t)
	bad := signed(t, f.agent, "did:web:other.example", toolsCallBody) // audience_mismatch
	rename := func(body, key string) string {
		return strings.Replace(body, `"org.kya-os/request-proof"`, key, 1)
	}
	withLegacy := func(body, legacy string) string { // legacy's proof under the legacy key too
		// SignRequest puts the proof last in _meta, last in params.
		proofOf := func(body string) string {
			i := strings.Index(body, `"org.kya-os/request-proof":`) + len(`"org.kya-os/request-proof":`)
			return body[i : len(body)-len("}}}")]
		}
		end := len(body) - len("}}}")
		return body[:end] + `,"org.kya-os/proof@1":` + proofOf(legacy) + body[end:]
	}
	valid := signed(t, f.agent, testAudience, toolsCallBody)
	cases := []struct {
		name, mode, contentType, body string
		policy                        bool
		status                        int
		code                          int    // JSON-RPC error code; 0: admitted
		reason                        string // proof reason for -31000
	}{
		{"exact key", "", "", bad, false, 401, -31000, "audience_mismatch"},
		{"variant key", "", "", rename(bad, `"ORG.kya-os/request-proof"`), false, 400, -32600, ""},
		{"variant key, policy", "", "", rename(bad, `"ORG.kya-os/request-proof"`), true, 400, -32600, ""},
		{"variant key, required", "required", "", rename(bad, `"ORG.kya-os/request-proof"`), false, 400, -32600, ""},
		{"legacy variant", "", "", rename(bad, `"org.kya-os/PROOF@1"`), false, 400, -32600, ""},
		{"Kelvin sign", "", "", rename(bad, "\"org.\u212aya-os/request-proof\""), false, 400, -32600, ""},
		{"escaped variant", "", "", rename(bad, `"\u004frg.kya-os/request-proof"`), false, 400, -32600, ""},
		{"both keys, one proof", "", "", withLegacy(valid, valid), false, 200, 0, ""},
		{"both keys, two proofs", "", "", withLegacy(valid, bad), false, 400, -32600, ""},
		{"_Meta, no policy", "", "", strings.Replace(bad, `"_meta"`, `"_Meta"`, 1), false, 400, -32600, ""},
		{"_Meta, policy", "", "", strings.Replace(bad, `"_meta"`, `"_Meta"`, 1), true, 400, -32600, ""},
		{"_META, no policy", "", "", strings.Replace(bad, `"_meta"`, `"_META"`, 1), false, 400, -32600, ""},
		// A POST that is not declared JSON is refused before any proof
		// is read (415), a valid one too.
		{"text/plain, bad proof", "", "text/plain", bad, false, 415, -32600, ""},
		{"form type, bad proof", "", "application/x-www-form-urlencoded", bad, false, 415, -32600, ""},
		{"application/jsonx, bad proof", "", "application/jsonx", bad, false, 415, -32600, ""},
		{"no Content-Type, bad proof", "", "-", bad, false, 415, -32600, ""},
		{"text/plain, valid proof", "", "text/plain", signed(t, f.agent, testAudience, toolsCallBody), false, 415, -32600, ""},
		{"text/plain, variant key", "", "text/plain", rename(bad, `"ORG.kya-os/request-proof"`), false, 415, -32600, ""},
		{"+json type, bad proof", "", "application/vnd.example+json", bad, false, 401, -31000, "audience_mismatch"},
		{"off reads no proof", "off", "", rename(bad, `"ORG.kya-os/request-proof"`), false, 200, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := f.handler(t, func(s *setup) {
				s.RequestProof = c.mode
				if c.policy {
					s.Tools = []ToolPolicy{{Name: "echo"}}
				}
			})
			r := proofCall(t, f, c.body)
			switch c.contentType {
			case "":
			case "-":
				r.Header.Del("Content-Type")
			default:
				r.Header.Set("Content-Type", c.contentType)
			}
			res := serve(t, h, r)
			if res.rec.Code != c.status || res.called != (c.code == 0) {
				t.Fatalf("status %d, upstream called %v: %s", res.rec.Code, res.called, res.rec.Body)
			}
			if c.code == 0 {
				if string(res.fwdBody) != c.body {
					t.Fatalf("forwarded %q, sent %q", res.fwdBody, c.body)
				}
				return
			}
			var e struct {
				Error struct {
					Code int
					Data struct{ Reasons []string }
				}
			}
			if err := json.Unmarshal(res.rec.Body.Bytes(), &e); err != nil {
				t.Fatalf("%v: %s", err, res.rec.Body)
			}
			if e.Error.Code != c.code || (c.reason != "" && (len(e.Error.Data.Reasons) != 1 || e.Error.Data.Reasons[0] != c.reason)) {
				t.Fatalf("error %s, want code %d reason %q", res.rec.Body, c.code, c.reason)
			}
		})
	}
}

// TestProofReadWhateverTheMethod: under optional, a proof in the body of
// any method that may carry one (PUT, PATCH, a lower-case post, which an
// upstream may treat as a POST) is read like a POST's: an invalid one is refused and never reaches the upstream.
func TestProofReadWhateverTheMethod(t *testing.T) {
	f := newFixture(t)
	bad := signed(t, f.agent, "did:web:other.example", toolsCallBody) // audience_mismatch
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, "post", "PROPFIND"} {
		t.Run(method, func(t *testing.T) {
			h := f.handler(t, nil)
			r := proofCall(t, f, bad)
			r.Method = method
			res := serve(t, h, r)
			if res.rec.Code != http.StatusUnauthorized || res.called || !strings.Contains(res.rec.Body.String(), `"audience_mismatch"`) {
				t.Fatalf("status %d, upstream called %v: %s", res.rec.Code, res.called, res.rec.Body)
			}
		})
	}
}

// TestProofInBatchRefused: under optional, a batch is admitted on its
// credential alone, but a proof inside one cannot be verified (a proof
// covers one request), so a batch carrying one is refused instead of forwarding the proof unread; a batch without
// proofs goes on.
func TestProofInBatchRefused(t *testing.T) {
	f := newFixture(t)
	valid := signed(t, f.agent, testAudience, toolsCallBody)
	plain := `{"jsonrpc":"2.0","id":9,"method":"ping"}`
	for _, c := range []struct {
		name, body string
		status     int
	}{
		{"proof in a batch of one", "[" + valid + "]", http.StatusUnauthorized},
		{"proof beside a ping", "[" + plain + "," + valid + "]", http.StatusUnauthorized},
		{"no proof", "[" + plain + "," + toolsCallBody + "]", http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := f.handler(t, nil)
			res := serve(t, h, proofCall(t, f, c.body))
			if res.rec.Code != c.status || res.called != (c.status == http.StatusOK) {
				t.Fatalf("status %d, upstream called %v: %s", res.rec.Code, res.called, res.rec.Body)
			}
			if c.status != http.StatusOK && !strings.Contains(res.rec.Body.String(), `"malformed_proof"`) {
				t.Fatalf("want malformed_proof: %s", res.rec.Body)
			}
		})
	}
}
