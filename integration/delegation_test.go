package integration

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// dlgB64 is base64url (no padding) of the JSON of v.
func dlgB64(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// dlgSign signs claims as the Ed25519 party p (a compact EdDSA JWS).
func dlgSign(t *testing.T, p party, claims map[string]any) string {
	t.Helper()
	input := dlgB64(t, map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": p.kid}) + "." + dlgB64(t, claims)
	return input + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(p.key.(ed25519.PrivateKey), []byte(input)))
}

// dlgChild is a VC-JWT from tmpl signed by iss whose delegation names
// parentID as its parent.
func dlgChild(t *testing.T, iss party, tmpl vc.Template, parentID string) string {
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
	cred := claims["vc"].(map[string]any)
	cred["credentialSubject"].(map[string]any)["delegation"].(map[string]any)["parentId"] = parentID
	return dlgSign(t, iss, claims)
}

// vpCount makes every dlgVP presentation a new one.
var vpCount atomic.Int64

// dlgVP wraps creds in a VP-JWT signed by holder for audience, a new
// presentation (its own jti) on every call.
func dlgVP(t *testing.T, holder party, audience string, creds ...string) string {
	t.Helper()
	now := time.Now()
	return dlgSign(t, holder, map[string]any{
		"iss": holder.did, "aud": audience, "jti": fmt.Sprintf("urn:uuid:vp-integration-%d", vpCount.Add(1)),
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(2 * time.Minute).Unix(),
		"vp": map[string]any{
			"@context":             []any{"https://www.w3.org/2018/credentials/v1"},
			"type":                 []any{"VerifiablePresentation"},
			"verifiableCredential": creds,
		},
	})
}

// TestDelegationChainAndPresentation: a two-link chain (a trusted root
// delegates to an intermediate agent, which delegates onwards) admits
// through the real Caddy binary when the leaf comes in Authorization, bare
// or in a VP-JWT signed by the agent, and the root in the
// KYA-OS-Delegation-Chain header; the SDK client reaches the MCP server,
// and neither the chain header nor the credentials reach it. The leaf
// alone is refused: its issuer is not trusted directly.
func TestDelegationChainAndPresentation(t *testing.T) {
	root := newParty(t, didresolver.Ed25519)
	h := newHarness(t, siteConfig{TrustedIssuer: root.did})
	w := newWorld(t, h)
	mid := newParty(t, didresolver.Ed25519)

	now := time.Now()
	rootTok := issueJWT(t, root.key, root.kid, w.template(func(tm *vc.Template) {
		tm.AgentDID = mid.did
		tm.ID = "urn:uuid:integration-root"
		tm.NotBefore, tm.ExpiresAt = now.Add(-2*time.Minute), now.Add(2*time.Hour)
	}))
	leaf := dlgChild(t, mid, w.template(func(tm *vc.Template) {
		tm.UserDID = ""
		tm.ID = "urn:uuid:integration-leaf"
		tm.Scopes = []string{"greet:execute"}
	}), "integration-root")

	// A presentation is taken once: the agent signs a new one for every
	// request (perRequest), the chain header stays the same.
	freshVP := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+dlgVP(t, w.agent, w.audience, leaf)) }
	cases := []struct {
		name       string
		header     http.Header
		perRequest func(*http.Request)
	}{
		{"VC-JWT leaf", http.Header{"Authorization": {"Bearer " + leaf}, "KYA-OS-Delegation-Chain": {rootTok}}, nil},
		{"VP-JWT", http.Header{"KYA-OS-Delegation-Chain": {`["` + rootTok + `"]`}}, freshVP},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h.perRequest = tc.perRequest
			defer func() { h.perRequest = nil }()
			reqs := h.listToolsAdmitted(t, "/trusted/mcp", tc.header, leaf, rootTok)
			for i, r := range reqs {
				for k := range r.Header {
					if normName(k) == "kya-os-delegation-chain" {
						t.Errorf("upstream request %d carried %s", i, k)
					}
				}
			}
		})
	}

	t.Run("leaf alone", func(t *testing.T) {
		h.upstream.Reset()
		ctx := testContext(t)
		if _, err := h.connect(ctx, "/trusted/mcp", http.Header{"Authorization": {"Bearer " + leaf}}, legacyProtocol, nil); err == nil {
			t.Fatal("connected with the leaf alone")
		}
		h.listToolsRefused(ctx, t, "/trusted/mcp", http.Header{"Authorization": {"Bearer " + leaf}}, http.StatusUnauthorized, "invalid_token", "chain_incomplete")
	})
}
