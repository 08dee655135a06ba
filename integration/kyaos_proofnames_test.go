package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestKYAOSOptionalProofNames, through the real Caddy, on a
// route with request_proof optional (the default) and no tool policy: an
// invalid proof is refused however it is named or typed. Under an exact
// key it gets 401 -31000; under a key in another case, beside the legacy
// key, or in a "_Meta", the body is ambiguous (400 -32600); sent as
// text/plain or a form, it is refused 415 before its proof is read.
// Nothing refused reaches the upstream; a valid proof passes byte for
// byte.
func TestKYAOSOptionalProofNames(t *testing.T) {
	h := startL3Edge(t, "", jsonRPCUpstream(), sharedStorage(t))
	w := newWorld(t, h)
	cred := w.jwt(t)
	ctx := testContext(t)
	aud := h.hostAudience()
	now := time.Now()
	bad := proveAs(t, w.agent, "did:web:elsewhere.example", now, kyaosCall) // audience_mismatch
	valid := proveAs(t, w.agent, aud, now, kyaosCall)
	const canonical = `"org.kya-os/request-proof":`
	bothKeys := func(body, legacy string) string { // legacy's proof under the legacy key too
		proofOf := func(body string) string { // the proof last in _meta (SignRequest)
			i := strings.Index(body, canonical) + len(canonical)
			return body[i : len(body)-len("}}}")]
		}
		end := len(body) - len("}}}")
		return body[:end] + `,"org.kya-os/proof@1":` + proofOf(legacy) + body[end:]
	}
	send := func(contentType, body string) rpcResponse {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("KYA-OS-Delegation-Credential", cred)
		return h.do(req)
	}
	cases := []struct {
		name, contentType, body string
		status, code            int
		reason                  string
	}{
		{"exact key", "application/json", bad, 401, -31000, "audience_mismatch"},
		{"key in upper case", "application/json", strings.Replace(bad, canonical, `"ORG.kya-os/request-proof":`, 1), 400, -32600, ""},
		{"key with a Kelvin sign", "application/json", strings.Replace(bad, canonical, "\"org.\u212aya-os/request-proof\":", 1), 400, -32600, ""},
		{"both keys, two proofs", "application/json", bothKeys(valid, bad), 400, -32600, ""},
		{"_Meta", "application/json", strings.Replace(bad, `"_meta"`, `"_Meta"`, 1), 400, -32600, ""},
		{"text/plain", "text/plain", bad, 415, -32600, ""},
		{"form content type", "application/x-www-form-urlencoded", bad, 415, -32600, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.upstream.Reset()
			resp := send(c.contentType, c.body)
			var e struct {
				Error struct {
					Code int
					Data struct{ Reasons []string }
				}
			}
			if resp.Status != c.status || json.Unmarshal(resp.Body, &e) != nil || e.Error.Code != c.code ||
				(c.reason != "" && (len(e.Error.Data.Reasons) != 1 || e.Error.Data.Reasons[0] != c.reason)) {
				t.Fatalf("HTTP %d %s, want %d with %d %s", resp.Status, resp.Body, c.status, c.code, c.reason)
			}
			if n := len(h.upstream.Requests()); n != 0 {
				t.Fatalf("%d requests reached the upstream", n)
			}
		})
	}
	t.Run("valid proof", func(t *testing.T) {
		h.upstream.Reset()
		fresh := proveAs(t, w.agent, aud, time.Now(), kyaosCall)
		resp := send("application/json", fresh)
		reqs := h.upstream.Requests()
		if resp.Status != 200 || len(reqs) != 1 || string(reqs[0].Body) != fresh {
			t.Fatalf("HTTP %d %s, %d upstream requests", resp.Status, resp.Body, len(reqs))
		}
	})
}
