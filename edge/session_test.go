package edge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestAcceptancePolicy: handlers that would accept the same credentials
// share a policy fingerprint (and so a session key and session bindings),
// whatever the order of their lists; any difference in what decides
// acceptance gives another one.
func TestAcceptancePolicy(t *testing.T) {
	const a, b = "did:web:a.example", "did:web:b.example"
	base := func() *setup {
		return &setup{Config: Config{Level: 3, TrustedIssuers: []string{a, b}, Audiences: []string{"https://x.example", "did:web:x.example"}}}
	}
	policy := base().acceptancePolicy()
	noAud := &Config{Level: 3, TrustedIssuers: []string{a}}
	emptyAud := &Config{Level: 3, TrustedIssuers: []string{a}, Audiences: []string{}}
	if noAud.acceptancePolicy() != emptyAud.acceptancePolicy() {
		t.Error("audiences absent and empty give two policies")
	}
	if len(policy) != 64 {
		t.Fatalf("policy %q is not a hex SHA-256", policy)
	}
	for _, tc := range []struct {
		name string
		mod  func(*setup)
		same bool
	}{
		{"same config", func(*setup) {}, true},
		{"trust in another order", func(c *setup) { c.TrustedIssuers = []string{b, a} }, true},
		{"trust repeated", func(c *setup) { c.TrustedIssuers = []string{a, b, a} }, true},
		{"audiences in another order", func(c *setup) { c.Audiences = []string{"did:web:x.example", "https://x.example"} }, true},
		{"required scopes (checked on use)", func(c *setup) { c.RequiredScopes = []string{"admin"} }, true},
		{"session ttl", func(c *setup) { c.SessionTTL = 1 }, true},
		{"empty JSON-LD contexts", func(c *setup) { c.JSONLDContexts = map[string]string{} }, true},
		{"one issuer fewer", func(c *setup) { c.TrustedIssuers = []string{a} }, false},
		{"trust any", func(c *setup) { c.TrustedIssuers = []string{AnyIssuer} }, false},
		{"other audiences", func(c *setup) { c.Audiences = []string{"https://x.example"} }, false},
		{"audiences from the Host", func(c *setup) { c.Audiences = nil }, false},
		{"require_audience", func(c *setup) { c.RequireAudience = true }, false},
		{"require_presentation", func(c *setup) { c.RequirePresentation = true }, false},
		{"level", func(c *setup) { c.Level = 2 }, false},
		{"JSON-LD off", func(c *setup) { c.DisableJSONLD = true }, false},
		{"extra JSON-LD context", func(c *setup) { c.JSONLDContexts = map[string]string{"https://ctx.example/v1": "ctx.json"} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			tc.mod(h)
			if got := h.acceptancePolicy(); (got == policy) != tc.same {
				t.Fatalf("same policy: %t, want %t", got == policy, tc.same)
			}
		})
	}
}

func TestDeriveSessionKey(t *testing.T) {
	stored := bytes.Repeat([]byte{7}, handshake.SessionKeySize)
	other := bytes.Repeat([]byte{8}, handshake.SessionKeySize)
	p1 := (&Config{Level: 3, TrustedIssuers: []string{AnyIssuer}}).acceptancePolicy()
	p2 := (&Config{Level: 3, TrustedIssuers: []string{"did:web:a.example"}}).acceptancePolicy()
	k, err := handshake.DeriveKey(stored, p1)
	if err != nil || len(k) != handshake.SessionKeySize {
		t.Fatalf("deriveSessionKey = %x, %v", k, err)
	}
	if bytes.Equal(k, stored) {
		t.Fatal("the derived key is the stored key")
	}
	again, _ := handshake.DeriveKey(stored, p1)
	if !bytes.Equal(k, again) {
		t.Fatal("one stored key and policy derive two keys: replicas would not share sessions")
	}
	for name, in := range map[string]struct {
		stored []byte
		policy string
	}{"other policy": {stored, p2}, "other stored key": {other, p1}} {
		if k2, _ := handshake.DeriveKey(in.stored, in.policy); bytes.Equal(k, k2) {
			t.Errorf("%s: same derived key", name)
		}
	}
}

// TestSessionRootIssuer: a session records the root issuer of its chain,
// and every use checks it against the route's trust list.
func TestSessionRootIssuer(t *testing.T) {
	c := newChainFixture(t)
	h := c.l3Handler(t, nil) // trusts c.user, the root's issuer
	sc := answer(t, c.agent, doHandshake(t, h, defaultHandshakePath, c.agent, nil))
	body, _ := json.Marshal(verifyMsg(2, sc, c.leaf))
	r := newRequest(http.MethodPost, defaultVerifyPath, string(body))
	r.Header.Set("KYA-OS-Delegation-Chain", c.root)
	rec, _ := l3Serve(t, h, r, nil)
	var rep rpcReply
	var vr challenge.VerifyResult
	if json.Unmarshal(rec.Body.Bytes(), &rep) != nil || json.Unmarshal(rep.Result, &vr) != nil || vr.SessionID == "" {
		t.Fatalf("verify: HTTP %d %s", rec.Code, rec.Body)
	}
	claims, err := h.l3.Sessions().Parse(vr.SessionID)
	if err != nil || claims.RootIssuer != c.user.did || claims.Issuer != c.mid.did {
		t.Fatalf("claims %+v, %v: want root %s, leaf issuer %s", claims, err, c.user.did, c.mid.did)
	}
	// Admitted on its route: the root, not the leaf's issuer, is trusted.
	r = newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set(handshake.HeaderSession, vr.SessionID)
	if res := serve(t, h, r); !res.called {
		t.Fatalf("chain session refused: HTTP %d %s", res.rec.Code, res.rec.Body)
	}

	// Sessions made directly, under the route's own key: only a trusted
	// root issuer is admitted (an empty one only under `trust any`).
	open := c.l3Handler(t, func(c *setup) { c.TrustedIssuers = []string{AnyIssuer} })
	for _, tc := range []struct {
		name, root string
		strict     bool // admitted by h
	}{
		{"trusted root", c.user.did, true},
		{"untrusted root", c.mid.did, false},
		{"no root", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &vc.Delegation{AgentDID: c.agent.did, UserDID: c.user.did, Issuer: c.mid.did, RootIssuer: tc.root,
				Scopes: []string{"tools:read"}, Format: vc.FormatJWTVC11, Hash: sha256.Sum256([]byte(c.leaf)),
				ExpiresAt: time.Now().Add(time.Hour)}
			for _, route := range []struct {
				h    *Handler
				want bool
			}{{h, tc.strict}, {open, true}} {
				tok, _, err := route.h.l3.Sessions().IssueSession(context.Background(), d, c.agent.did)
				if err != nil {
					t.Fatal(err)
				}
				r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
				r.Header.Set(handshake.HeaderSession, tok)
				res := serve(t, route.h, r)
				if res.called != route.want {
					t.Fatalf("trust %v: admitted %t, want %t (HTTP %d %s)", route.h.cfg.TrustedIssuers, res.called, route.want, res.rec.Code, res.rec.Body)
				}
				if !route.want && decodeErr(t, res.rec).Reason != "untrusted_issuer" {
					t.Errorf("reason %q, want untrusted_issuer", decodeErr(t, res.rec).Reason)
				}
			}
		})
	}
}
