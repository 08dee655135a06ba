package integration

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
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
	listTools := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

	t.Run("leaf alone, parent fetched", func(t *testing.T) {
		h.upstream.Reset()
		ctx := testContext(t)
		cs := h.mustConnect(ctx, "/fetch/mcp", http.Header{"Authorization": {"Bearer " + leaf}}, legacyProtocol, nil)
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if len(tools.Tools) == 0 {
			t.Error("tools/list returned no tools")
		}
		reqs := h.upstream.Requests()
		if methods := rpcMethods(reqs); !slices.Contains(methods, "tools/list") {
			t.Errorf("upstream never saw tools/list (saw %v)", methods)
		}
		assertNotForwarded(t, reqs, leaf)
		if n := st.hitCount("/chain/root"); n != 1 {
			t.Errorf("the parent was fetched %d times, want once (then cached)", n)
		}
	})

	t.Run("fetch off", func(t *testing.T) {
		h.upstream.Reset()
		ctx := testContext(t)
		resp := h.post(ctx, "/nofetch/mcp", http.Header{"Authorization": {"Bearer " + leaf}}, "", listTools)
		body := h.assertEdgeError(t, resp, http.StatusUnauthorized, "invalid_token")
		if body.Reason != "chain_incomplete" {
			t.Errorf("reason %q, want chain_incomplete", body.Reason)
		}
		if reqs := h.upstream.Requests(); len(reqs) != 0 {
			t.Errorf("upstream saw %d requests", len(reqs))
		}
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
		resp := h.post(ctx, "/fetch/mcp", http.Header{"Authorization": {"Bearer " + leafNaming("/chain/forged")}}, "", listTools)
		body := h.assertEdgeError(t, resp, http.StatusUnauthorized, "invalid_token")
		if body.Reason != "bad_signature" {
			t.Errorf("reason %q, want bad_signature", body.Reason)
		}
		if reqs := h.upstream.Requests(); len(reqs) != 0 {
			t.Errorf("upstream saw %d requests", len(reqs))
		}
	})

	t.Run("parent not found", func(t *testing.T) {
		h.upstream.Reset()
		ctx := testContext(t)
		resp := h.post(ctx, "/fetch/mcp", http.Header{"Authorization": {"Bearer " + leafNaming("/chain/missing")}}, "", listTools)
		body := h.assertEdgeError(t, resp, http.StatusServiceUnavailable, "temporarily_unavailable")
		if body.Reason != "chain_fetch_failed" {
			t.Errorf("reason %q, want chain_fetch_failed", body.Reason)
		}
		if reqs := h.upstream.Requests(); len(reqs) != 0 {
			t.Errorf("upstream saw %d requests", len(reqs))
		}
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
