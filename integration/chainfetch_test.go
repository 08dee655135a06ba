package integration

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestChainFetch: a two-link chain whose leaf alone is presented, naming
// its parent by delegation.parentCredentialUrl, is admitted through the
// real Caddy binary on a route with chain_fetch, the parent being fetched
// over https from a local TLS server (trusted through SSL_CERT_FILE,
// reached with allow_private_did_web) and verified; on a route without
// chain_fetch the same request is refused with 401 chain_incomplete. A
// fetched parent that does not verify is refused (bad_signature), and one
// that cannot be fetched fails closed with 503 chain_fetch_failed.
func TestChainFetch(t *testing.T) {
	st := newStatusListServer(t) // its issuer is the trusted root issuer
	h := newChainFetchHarness(t, st)
	w := newWorld(t, h)
	mid := newParty(t, didresolver.Ed25519)

	now := time.Now()
	rootTmpl := w.template(func(tm *vc.Template) {
		tm.AgentDID = mid.did
		tm.ID = "urn:uuid:integration-fetch-root"
		tm.NotBefore, tm.ExpiresAt = now.Add(-2*time.Minute), now.Add(2*time.Hour)
	})
	root, err := vc.IssueJSON(st.issuer.key.(ed25519.PrivateKey), st.issuer.kid, rootTmpl)
	if err != nil {
		t.Fatal(err)
	}
	st.set("/chain/root", root)
	leafNaming := func(path string) string {
		return fetchChild(t, mid, w.template(func(tm *vc.Template) {
			tm.UserDID = ""
			tm.ID = "urn:uuid:integration-fetch-leaf"
			tm.Scopes = []string{"greet:execute"}
		}), "integration-fetch-root", st.url(path))
	}
	leaf := leafNaming("/chain/root")

	t.Run("leaf alone, parent fetched", func(t *testing.T) {
		h.listToolsAdmitted(t, "/fetch/mcp", http.Header{"Authorization": {"Bearer " + leaf}}, leaf)
		if n := st.hitCount("/chain/root"); n != 1 {
			t.Errorf("the parent was fetched %d times, want once (then cached)", n)
		}
	})

	t.Run("fetch off", func(t *testing.T) {
		h.upstream.Reset()
		ctx := testContext(t)
		h.listToolsRefused(ctx, t, "/nofetch/mcp", http.Header{"Authorization": {"Bearer " + leaf}}, http.StatusUnauthorized, "invalid_token", "chain_incomplete")
	})

	t.Run("fetched parent does not verify", func(t *testing.T) {
		var doc map[string]any
		if err := json.Unmarshal(root, &doc); err != nil {
			t.Fatal(err)
		}
		// Widen the parent's scopes after it was signed.
		doc["credentialSubject"].(map[string]any)["delegation"].(map[string]any)["scopes"] = []any{"greet:execute", "files:read", "files:write"}
		forged, _ := json.Marshal(doc)
		st.set("/chain/forged", forged)
		h.upstream.Reset()
		ctx := testContext(t)
		h.listToolsRefused(ctx, t, "/fetch/mcp", http.Header{"Authorization": {"Bearer " + leafNaming("/chain/forged")}}, http.StatusUnauthorized, "invalid_token", "bad_signature")
	})

	t.Run("parent not found", func(t *testing.T) {
		h.upstream.Reset()
		ctx := testContext(t)
		h.listToolsRefused(ctx, t, "/fetch/mcp", http.Header{"Authorization": {"Bearer " + leafNaming("/chain/missing")}}, http.StatusServiceUnavailable, "temporarily_unavailable", "chain_fetch_failed")
	})
}

// fetchChild is a VC-JWT from tmpl signed by iss whose delegation names
// parentID as its parent, to be fetched from parentURL.
func fetchChild(t *testing.T, iss party, tmpl vc.Template, parentID, parentURL string) string {
	t.Helper()
	tok := issueJWT(t, iss.key, iss.kid, tmpl)
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	dlg := claims["vc"].(map[string]any)["credentialSubject"].(map[string]any)["delegation"].(map[string]any)
	dlg["parentId"] = parentID
	dlg["parentCredentialUrl"] = parentURL
	return dlgSign(t, iss, claims)
}

// newChainFetchHarness starts the recorded demo MCP server and Caddy in
// front of it with two routes trusting only st's issuer: /fetch/* fetches
// parents from st under /chain/, /nofetch/* does not. Caddy runs with
// SSL_CERT_FILE set to st's certificate.
func newChainFetchHarness(t *testing.T, st *statusListServer) *harness {
	t.Helper()
	rec := &recorder{next: mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	upstream := up.Listener.Addr().String()
	caddyfile := testCaddyfile(freePort(t), filepath.Join(dir, "storage"), fmt.Sprintf(`:%[1]d {
	bind 127.0.0.1
	handle_path /fetch/* {
		mcpi {
			trust %[2]s
			allow_private_did_web
			chain_fetch %[3]s {
				timeout 2s
			}
		}
		reverse_proxy %[4]s
	}
	handle_path /nofetch/* {
		mcpi {
			trust %[2]s
			allow_private_did_web
		}
		reverse_proxy %[4]s
	}
}
`, h.port, st.issuer.did, st.url("/chain/"), upstream))
	h.start(dir, caddyfile, "SSL_CERT_FILE="+st.certFile)
	return h
}
