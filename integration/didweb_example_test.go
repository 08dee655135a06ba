package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestDIDWebIssuer: the edge resolves a did:web issuer (served over plain
// http from loopback, which allow_private_did_web permits) and accepts what
// that key signed, and nothing else: another key under the same kid, a kid
// the document does not list, a trusted did:web that cannot be fetched (fail
// closed), a did:key issuer that is not on the trust list.
func TestDIDWebIssuer(t *testing.T) {
	issuerKey, err := didresolver.GenerateKey(didresolver.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := didresolver.PublicKeyOf(issuerKey)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := didresolver.PublicJWK(pub)
	if err != nil {
		t.Fatal(err)
	}

	var doc []byte
	var fetches atomic.Int32
	didSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/did.json" {
			http.NotFound(w, r)
			return
		}
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/did+json")
		_, _ = w.Write(doc)
	}))
	defer didSrv.Close()
	did := fmt.Sprintf("did:web:127.0.0.1%%3A%d", didSrv.Listener.Addr().(*net.TCPAddr).Port)
	kid := did + "#key-1"
	doc, err = json.Marshal(map[string]any{
		"@context": []string{"https://www.w3.org/ns/did/v1", "https://w3id.org/security/suites/jws-2020/v1"},
		"id":       did,
		"verificationMethod": []map[string]any{{
			"id": kid, "type": "JsonWebKey2020", "controller": did, "publicKeyJwk": jwk,
		}},
		"authentication":  []string{kid},
		"assertionMethod": []string{kid},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Trusted, but nothing listens there: resolution must fail closed.
	unreachable := fmt.Sprintf("did:web:127.0.0.1%%3A%d", freePort(t))

	h := newHarness(t, siteConfig{DIDWebIssuer: did + " " + unreachable})
	w := newWorld(t, h)
	otherKey, err := didresolver.GenerateKey(didresolver.Ed25519)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		token  string
		reason error // nil: accepted
	}{
		{"ok", issueJWT(t, issuerKey, kid, w.template()), nil},
		{"fail-other-key-same-kid", issueJWT(t, otherKey, kid, w.template()), vc.ErrSignature},
		{"fail-kid-not-in-document", issueJWT(t, issuerKey, did+"#key-2", w.template()), vc.ErrUnknownKey},
		{"fail-unreachable-did-web", issueJWT(t, otherKey, unreachable+"#key-1", w.template()), vc.ErrIssuerUnresolved},
		{"fail-untrusted-did-key", w.jwt(t), vc.ErrUntrustedIssuer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h.upstream.Reset()
			ctx := testContext(t)
			hdr := http.Header{"Authorization": {"Bearer " + tc.token}}
			if tc.reason == nil {
				cs := h.mustConnect(ctx, "/didweb/mcp", hdr, legacyProtocol, nil)
				greet(ctx, t, cs)
				assertNotForwarded(t, h.upstream.Requests(), tc.token)
				if fetches.Load() == 0 {
					t.Error("the DID document was never fetched")
				}
				return
			}
			resp := h.post(ctx, "/didweb/mcp", hdr, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
			body := h.assertEdgeError(t, resp, http.StatusUnauthorized, "invalid_token")
			if want := vc.Reason(tc.reason); body.Reason != want {
				t.Errorf("reason %q, want %q (body %s)", body.Reason, want, resp.Body)
			}
			if reqs := h.upstream.Requests(); len(reqs) != 0 {
				t.Errorf("upstream saw %d requests", len(reqs))
			}
		})
	}
}

// TestCaddyfileExample: the shipped Caddyfile.example adapts and validates,
// and the README flow works: the real mcpi-demo binary behind Caddy running
// that file (ports moved to free ones), a 401 for a bare request to
// http://localhost:<port>/mcp, and an SDK client with a credential minted for
// the audience http://localhost:<port> — by the library and by the
// `caddy mcpi keygen` / `caddy mcpi issue` CLI — reaching the tools, with
// the verified identity forwarded at Level 2 and the edge's signed
// assertion verified by the demo server.
func TestCaddyfileExample(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The file's ports are {$MCPI_DEMO_*_PORT:default} placeholders (so
	// scripts/demo.sh can move them); drop any the developer exported so the
	// adapt check sees the defaults the README documents.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPI_DEMO_") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)

	t.Run("adapt", func(t *testing.T) {
		cmd := exec.Command(caddyBin, "adapt", "--config", filepath.Join("..", "Caddyfile.example"), "--adapter", "caddyfile", "--validate")
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("caddy adapt --validate: %v\n%s", err, stderr.String())
		}
		// Operators copy this file; it should be what `caddy fmt` writes.
		if strings.Contains(stderr.String(), "not formatted") {
			t.Errorf("Caddyfile.example is not formatted (caddy fmt --overwrite Caddyfile.example)")
		}
		// Find the mcpi handler in the adapted JSON and check the two lines
		// the demo depends on.
		var found map[string]any
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if v["handler"] == "mcpi" {
					found = v
				}
				for _, c := range v {
					walk(c)
				}
			case []any:
				for _, c := range v {
					walk(c)
				}
			}
		}
		var cfg any
		if err := json.Unmarshal(out, &cfg); err != nil {
			t.Fatalf("adapted config is not JSON: %v", err)
		}
		walk(cfg)
		if found == nil {
			t.Fatalf("no mcpi handler in the adapted config: %s", out)
		}
		if got := fmt.Sprint(found["trusted_issuers"]); got != "[*]" {
			t.Errorf("trusted_issuers %s, want [*]", got)
		}
		if got := fmt.Sprint(found["audiences"]); got != "[http://localhost:8080 did:web:localhost%3A8080]" {
			t.Errorf("audiences %s", got)
		}
	})

	t.Run("run", func(t *testing.T) {
		edgePort, adminPort, demoPort := freePort(t), freePort(t), freePort(t)
		demoAddr := "127.0.0.1:" + strconv.Itoa(demoPort)
		demo := exec.Command(demoBin, "-addr", demoAddr,
			"-edge-jwks", fmt.Sprintf("http://localhost:%d/.well-known/jwks.json", edgePort),
			"-audience", "http://"+demoAddr)
		demoOut := &syncBuffer{}
		demoExited := startProcess(t, demo, demoOut, func() string { return "mcpi-demo output:\n" + demoOut.String() })
		waitHTTP(t, "http://"+demoAddr+"/healthz", demoExited)

		// Move the ports the way scripts/demo.sh does, through the file's
		// environment placeholders: a port the file wrote out instead would
		// leave Caddy on 8080 or proxying to 9000, and this run would fail.
		origin := fmt.Sprintf("http://localhost:%d", edgePort)
		h := &harness{t: t, port: edgePort, base: origin, output: &syncBuffer{}}
		startCaddy(t, dir, string(src), origin+"/healthz", h.output,
			"MCPI_DEMO_EDGE_PORT="+strconv.Itoa(edgePort),
			"MCPI_DEMO_UPSTREAM_PORT="+strconv.Itoa(demoPort),
			"MCPI_DEMO_ADMIN_PORT="+strconv.Itoa(adminPort))
		ctx := testContext(t)

		// The admin API moved too (a system Caddy often holds 2019).
		adminReq, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://localhost:%d/config/", adminPort), nil)
		if resp, err := http.DefaultClient.Do(adminReq); err != nil {
			t.Errorf("admin API on MCPI_DEMO_ADMIN_PORT: %v", err)
		} else {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("admin API on MCPI_DEMO_ADMIN_PORT: %s", resp.Status)
			}
		}

		// curl -i http://localhost:8080/mcp
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, origin+"/mcp", nil)
		h.assertEdgeError(t, h.do(req), http.StatusUnauthorized, "invalid_token")

		agent := newParty(t, didresolver.Ed25519)
		issuer := newParty(t, didresolver.Ed25519)
		libTok := issueJWT(t, issuer.key, issuer.kid, (&world{agent: agent, user: issuer, audience: origin}).template())

		// The operator CLI, as the README uses it.
		keyFile := filepath.Join(dir, "issuer.jwk")
		keygen := exec.Command(caddyBin, "mcpi", "keygen", "--out", keyFile)
		keygen.Env = env
		keygenOut, err := keygen.Output()
		if err != nil {
			t.Errorf("caddy mcpi keygen: %v\n%s%s", err, keygenOut, stderrOf(err))
		}
		cliUser := strings.TrimSpace(string(keygenOut)) // --out prints the DID
		issue := exec.Command(caddyBin, "mcpi", "issue", "--issuer-key", keyFile, "--agent", agent.did,
			"--audience", origin, "--scopes", "greet:execute", "--ttl", "1h")
		issue.Env = env
		cliOut, err := issue.Output()
		if err != nil {
			t.Errorf("caddy mcpi issue: %v\n%s", err, stderrOf(err))
		}
		cliTok := strings.TrimSpace(string(cliOut))

		for _, c := range []struct{ name, tok, user string }{{"library credential", libTok, issuer.did}, {"CLI credential", cliTok, cliUser}} {
			t.Run(c.name, func(t *testing.T) {
				if c.tok == "" {
					t.Fatal("no credential to present (the CLI printed none; its error, if any, is above)")
				}
				cs := h.mustConnect(ctx, "/mcp", http.Header{"Authorization": {"Bearer " + c.tok}}, "", nil)
				greet(ctx, t, cs)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
				if err != nil || res.IsError {
					t.Fatalf("whoami: %v %+v", err, res)
				}
				id, _ := res.StructuredContent.(map[string]any)
				if id["agent_did"] != agent.did || id["user_did"] != c.user {
					t.Errorf("whoami = %v, want agent_did %s, user_did %s", res.StructuredContent, agent.did, c.user)
				}
				// Level 2: the demo server verified the edge's signed
				// assertion against the JWKS the edge publishes.
				if id["edge_verified"] != true {
					t.Errorf("whoami = %v, want edge_verified true", res.StructuredContent)
				}
			})
		}

		// The explicit audience list replaces the derived one: a credential
		// for another service is refused.
		wrongTok := issueJWT(t, issuer.key, issuer.kid, (&world{agent: agent, user: issuer, audience: "https://elsewhere.example"}).template())
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, origin+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+wrongTok)
		body := h.assertEdgeError(t, h.do(req), http.StatusUnauthorized, "invalid_token")
		if body.Reason != vc.Reason(vc.ErrAudience) {
			t.Errorf("reason %q, want %q", body.Reason, vc.Reason(vc.ErrAudience))
		}
	})
}

// stderrOf returns the captured stderr of a failed exec.Cmd.Output.
func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
