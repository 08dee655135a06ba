package edge

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// TestHandshakeVerifyWithChainHeader: a verify call whose credential was
// re-delegated reads the ancestors from the chain header, as any request
// does, in both handshake modes; the chain is verified, never trusted
// because it was sent.
func TestHandshakeVerifyWithChainHeader(t *testing.T) {
	c := newChainFixture(t)
	verify := func(t *testing.T, h *Handler, chain ...string) rpcReply {
		t.Helper()
		sc := answer(t, c.agent, doHandshake(t, h, defaultHandshakePath, c.agent, nil))
		body, err := json.Marshal(verifyMsg(2, sc, c.leaf))
		if err != nil {
			t.Fatal(err)
		}
		r := newRequest(http.MethodPost, defaultVerifyPath, string(body))
		for _, v := range chain {
			r.Header.Add("KYA-OS-Delegation-Chain", v)
		}
		rec, called := l3Serve(t, h, r, nil)
		rep := rpcReply{Status: rec.Code, Raw: rec.Body.Bytes(), Next: called}
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatalf("HTTP %d, not JSON-RPC: %s", rec.Code, rec.Body)
		}
		return rep
	}

	h := c.l3Handler(t, nil)
	t.Run("parent in the header", func(t *testing.T) {
		rep := verify(t, h, c.root)
		if rep.Status != http.StatusOK || rep.Error != nil || rep.Next {
			t.Fatalf("HTTP %d next=%t %s", rep.Status, rep.Next, rep.Raw)
		}
		var vr challenge.VerifyResult
		if err := json.Unmarshal(rep.Result, &vr); err != nil {
			t.Fatal(err)
		}
		// The user is the chain's root issuer, not the leaf's issuer.
		if !vr.Verified || vr.AgentDID != c.agent.did || vr.UserDID != c.user.did || vr.SessionID == "" {
			t.Fatalf("verify result %+v", vr)
		}
	})
	for _, tc := range []struct {
		name  string
		chain []string
	}{
		{"no parent", nil},
		{"forged parent", []string{tamperJWS(c.root)}},
		{"unreadable chain", []string{`["not a credential"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := verify(t, h, tc.chain...)
			if rep.Status != http.StatusOK || rep.code() != challenge.CodeUntrustedCredential || rep.Next {
				t.Fatalf("HTTP %d next=%t %s, want error %d", rep.Status, rep.Next, rep.Raw, challenge.CodeUntrustedCredential)
			}
		})
	}

	t.Run("proxy mode: verified at the edge, chain not forwarded", func(t *testing.T) {
		up := newFakeUpstream(t, "/rpc/hs", "/rpc/vf")
		up.docPaths = map[string]string{"handshake": "/rpc/hs", "verify": "/rpc/vf"}
		next := up.handler()
		hp := c.l3Handler(t, func(c *setup) { c.Handshake = HandshakeProxy })
		hr := doHandshake(t, hp, defaultHandshakePath, c.agent, next)
		up.drain()
		body, _ := json.Marshal(verifyMsg(2, answer(t, c.agent, hr), c.leaf))
		r := newRequest(http.MethodPost, defaultVerifyPath, string(body))
		r.Header.Set("KYA-OS-Delegation-Chain", c.root)
		rec, _ := l3Serve(t, hp, r, next)
		got := up.drain()
		if rec.Code != http.StatusOK || len(got) != 1 || got[0].Path != "/rpc/vf" {
			t.Fatalf("HTTP %d %s; upstream got %+v", rec.Code, rec.Body, got)
		}
		if v := got[0].Header.Get("X-User-Did"); v != c.user.did {
			t.Errorf("forwarded verify: X-User-DID %q, want the root issuer %q", v, c.user.did)
		}
		if v := got[0].Header.Get("Kya-Os-Delegation-Chain"); v != "" {
			t.Errorf("chain header forwarded: %.40s", v)
		}
	})
}
