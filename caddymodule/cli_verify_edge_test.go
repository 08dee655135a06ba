package caddymodule

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpi-edge/caddy-mcpi/mcpicli"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestCLIVerifyAgreesWithEdge: `caddy mcpi verify --config` and the edge
// the same config runs (at Level 2, where the edge also signs an
// assertion for the upstream) give the same verdict and the same reason
// for the same credential, at the edges of its validity window too.
func TestCLIVerifyAgreesWithEdge(t *testing.T) {
	is, other := newCLIIssuer(t), newCLIIssuer(t)
	cfg := writeConfig(t, "Caddyfile", `http://mcp.example.com {
	mcpi {
		trust `+is.did+`
		level 2
		clock_skew 60s
	}
	respond ok
}
`)
	now := time.Now()
	issue := func(by *cliIssuer, aud string, nbf, exp time.Duration) string {
		t.Helper()
		tok, err := vc.IssueJWT(by.key, by.kid, vc.Template{
			AgentDID: "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", Audience: []string{aud},
			NotBefore: now.Add(nbf), ExpiresAt: now.Add(exp),
		})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	const aud = "did:web:mcp.example.com"
	cases := []struct {
		name, cred string
		reason     string // "" for accepted
	}{
		{"valid", issue(is, aud, -time.Minute, time.Hour), ""},
		// Issued with --ttl 3s and used 6s later: inside the skew.
		{"expired within the skew", issue(is, aud, -9*time.Second, -6*time.Second), ""},
		{"expired beyond the skew", issue(is, aud, -time.Hour, -2*time.Minute), "expired"},
		{"not yet valid", issue(is, aud, 10*time.Minute, time.Hour), "not_yet_valid"},
		{"wrong audience", issue(is, "did:web:other.example", -time.Minute, time.Hour), "wrong_audience"},
		{"untrusted issuer", issue(other, aud, -time.Minute, time.Hour), "untrusted_issuer"},
	}

	serve := edgeOfConfig(t, cfg)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cliReason := cliVerdict(t, cfg, tc.cred)
			edgeReason, upstream := serve(tc.cred)
			if cliReason != edgeReason {
				t.Fatalf("verify says %q, the edge %q (\"\" = accepted): they must agree", cliReason, edgeReason)
			}
			if cliReason != tc.reason {
				t.Fatalf("both say %q, want %q", cliReason, tc.reason)
			}
			if accepted := tc.reason == ""; accepted != (upstream != nil) {
				t.Fatalf("accepted %v but the upstream was reached: %v", accepted, upstream != nil)
			}
			if upstream != nil {
				checkAssertionWindow(t, upstream.Get("X-Verified-Delegation"), now.Add(60*time.Second))
			}
		})
	}
}

// cliVerdict runs `verify --config cfg` on cred: "" when it accepts it,
// else the reason it prints.
func cliVerdict(t *testing.T, cfg, cred string) string {
	t.Helper()
	stdout, stderr, err := runCmd(t, verifyCommand(), cred, "--config", cfg, "-")
	if err == nil {
		if !strings.Contains(stdout, `"agent_did"`) {
			t.Fatalf("verify accepted without printing the delegation: %q", stdout)
		}
		return ""
	}
	if err != mcpicli.ErrInvalidCredential {
		t.Fatalf("verify: %v (%s)", err, stderr)
	}
	reason, ok := strings.CutPrefix(strings.SplitN(stderr, "\n", 2)[0], "invalid: ")
	if !ok {
		t.Fatalf("verify refused without a reason: %q", stderr)
	}
	return reason
}

// edgeOfConfig provisions the mcpi handler of cfg as Caddy would and
// returns a function that presents a credential to it, as a tools/call to
// its site: the reason of a refusal ("" when admitted) and the headers
// that reached the upstream (nil when nothing did).
func edgeOfConfig(t *testing.T, cfg string) func(cred string) (string, http.Header) {
	t.Helper()
	cfgJSON, _, _, err := caddycmd.LoadConfig(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(cfgJSON, &doc); err != nil {
		t.Fatal(err)
	}
	handlers := mcpiHandlers(doc, nil)
	if len(handlers) != 1 {
		t.Fatalf("%d mcpi handlers in the config, want 1", len(handlers))
	}
	delete(handlers[0], "handler")
	b, _ := json.Marshal(handlers[0])
	h := new(Handler)
	if err := caddy.StrictUnmarshalJSON(b, h); err != nil {
		t.Fatal(err)
	}
	if err := h.Provision(bareContext(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Cleanup() })
	return func(cred string) (string, http.Header) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami"}}`
		r := httptest.NewRequest(http.MethodPost, "http://mcp.example.com/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+cred)
		r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
		w := httptest.NewRecorder()
		var upstream http.Header
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			upstream = r.Header.Clone()
			w.WriteHeader(http.StatusOK)
			return nil
		})
		if err := h.ServeHTTP(w, r, next); err != nil {
			t.Fatalf("ServeHTTP: %v", err)
		}
		if w.Code == http.StatusOK && upstream != nil {
			return "", upstream
		}
		var rej struct {
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &rej); err != nil || rej.Reason == "" {
			t.Fatalf("the edge answered %d %q without a reason", w.Code, w.Body.String())
		}
		return rej.Reason, nil
	}
}

// mcpiHandlers appends the {"handler": "mcpi", ...} objects of v, a
// decoded JSON config, to out.
func mcpiHandlers(v any, out []map[string]any) []map[string]any {
	switch t := v.(type) {
	case map[string]any:
		if t["handler"] == "mcpi" {
			out = append(out, t)
		}
		for _, c := range t {
			out = mcpiHandlers(c, out)
		}
	case []any:
		for _, c := range t {
			out = mcpiHandlers(c, out)
		}
	}
	return out
}

// checkAssertionWindow: the upstream's assertion is current and ends no
// later than latest.
func checkAssertionWindow(t *testing.T, tok string, latest time.Time) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("X-Verified-Delegation %q is not a JWS", tok)
	}
	var c struct {
		Iat, Exp int64
	}
	if err := json.Unmarshal(mustDecodeSegment(t, parts[1]), &c); err != nil {
		t.Fatal(err)
	}
	if c.Exp <= time.Now().Unix() || c.Exp < c.Iat || c.Exp > latest.Unix()+1 {
		t.Fatalf("assertion iat %d exp %d: want it current and ending by %d", c.Iat, c.Exp, latest.Unix())
	}
}

func mustDecodeSegment(t *testing.T, seg string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
