package integration

import (
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// dpopClient is a small DPoP client (RFC 9449): every request it sends
// carries its credential with the DPoP scheme and a fresh proof, signed by
// its key, for that request's method and URL and the credential's hash.
type dpopClient struct {
	base  http.RoundTripper
	key   ed25519.PrivateKey
	token string

	mu   sync.Mutex
	sent []string // the proofs sent, in order
}

func (c *dpopClient) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	u := *r.URL
	u.RawQuery, u.Fragment = "", ""
	proof, err := dpop.NewProof(c.key, r.Method, u.String(), c.token, time.Now())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.sent = append(c.sent, proof)
	c.mu.Unlock()
	r.Header.Set("Authorization", "DPoP "+c.token)
	r.Header.Set("DPoP", proof)
	return c.base.RoundTrip(r)
}

// TestDPoPBoundCredentialThroughCaddy: an agent holding a credential bound
// to its DPoP key (cnf.jkt; its DID the did:jwk of that key) works through
// a real Caddy with the Go SDK client, a proof on every request, on a
// route whose path Caddy rewrites (handle_path: htu is the URL the client
// used). Its identity reaches the upstream; the credential and the proofs
// do not. A replayed proof, or the credential without a proof, never
// reaches the upstream.
func TestDPoPBoundCredentialThroughCaddy(t *testing.T) {
	h := newHarness(t, siteConfig{})
	w := newWorld(t, h)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	agentDID, err := didresolver.JWKDID(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	pub, err := jwk.FromRaw(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	jkt, err := dpop.Thumbprint(pub)
	if err != nil {
		t.Fatal(err)
	}
	tok := w.jwt(t, func(tm *vc.Template) { tm.AgentDID, tm.CnfJKT = agentDID, jkt })

	h.upstream.Reset()
	ctx := testContext(t)
	client := &dpopClient{key: key, token: tok}
	cs, err := h.connectWith(ctx, "/id/mcp", nil, legacyProtocol, nil, func(tr *mcp.StreamableClientTransport) {
		client.base = tr.HTTPClient.Transport
		tr.HTTPClient = &http.Client{Transport: client}
	})
	if err != nil {
		t.Fatalf("connect with DPoP: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	greet(ctx, t, cs)

	reqs := h.upstream.Requests()
	methods := rpcMethods(reqs)
	for _, m := range []string{"initialize", "tools/list", "tools/call"} {
		if !strings.Contains(strings.Join(methods, " "), m) {
			t.Errorf("upstream never saw %s (saw %v)", m, methods)
		}
	}
	client.mu.Lock()
	proofs := append([]string(nil), client.sent...)
	client.mu.Unlock()
	assertNotForwarded(t, reqs, append([]string{tok}, proofs...)...)
	for _, r := range reqs {
		if r.Method != http.MethodPost {
			continue
		}
		if got := r.Header.Get("X-Agent-DID"); got != agentDID {
			t.Errorf("X-Agent-DID %q, want the did:jwk of the DPoP key", got)
		}
		if got := r.Header.Get("X-User-DID"); got != w.user.did {
			t.Errorf("X-User-DID %q, want %q", got, w.user.did)
		}
	}

	// A proof already used, sent again with the credential: refused, and
	// never forwarded.
	h.upstream.Reset()
	list := map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
	replay := http.Header{"Authorization": {"DPoP " + tok}, "Dpop": {proofs[len(proofs)-1]}}
	resp := h.post(ctx, "/id/mcp", replay, "", list)
	if body := h.assertEdgeError(t, resp, http.StatusUnauthorized, "invalid_token"); body.Reason != "dpop_replayed" {
		t.Errorf("replayed proof: reason %q", body.Reason)
	}
	if !strings.Contains(strings.Join(resp.Header.Values("WWW-Authenticate"), ", "), `DPoP error="invalid_dpop_proof"`) {
		t.Errorf("no DPoP challenge: %q", resp.Header.Values("WWW-Authenticate"))
	}
	// The bound credential as a bearer, and with the DPoP scheme but no
	// proof.
	h.listToolsRefused(ctx, t, "/id/mcp", http.Header{"Authorization": {"Bearer " + tok}}, http.StatusUnauthorized, "invalid_token", "dpop_missing")
	h.listToolsRefused(ctx, t, "/id/mcp", http.Header{"Authorization": {"DPoP " + tok}}, http.StatusUnauthorized, "invalid_token", "dpop_missing")
	// A proof made for the path the upstream sees (after handle_path), not
	// the one the client addressed.
	inner, err := dpop.NewProof(key, http.MethodPost, h.base+"/mcp", tok, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h.listToolsRefused(ctx, t, "/id/mcp", http.Header{"Authorization": {"DPoP " + tok}, "Dpop": {inner}}, http.StatusUnauthorized, "invalid_token", "dpop_invalid")
	if reqs := h.upstream.Requests(); len(reqs) != 0 {
		t.Errorf("refused requests reached the upstream: %v", rpcMethods(reqs))
	}
}
