package edge

import (
	"context"
	"net/http"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// TestAnonymousToolUnderRequestProof: a tool that needs no credential is
// still under request_proof. Under required, no proof is refused
// (proof_missing) and a valid one, by any agent, admits; under optional a
// proof present must be valid. Nothing refused reaches the upstream.
func TestAnonymousToolUnderRequestProof(t *testing.T) {
	f := newFixture(t)
	stranger := newParty(t)
	call := polCall(3, "public")
	for _, c := range []struct {
		name, mode, body string
		status           int
		reason           string
	}{
		{"required, none", "required", call, http.StatusUnauthorized, "proof_missing"},
		{"required, valid", "required", signed(t, stranger, testAudience, call), http.StatusOK, ""},
		{"required, wrong audience", "required", signed(t, stranger, "did:web:other.example", call), http.StatusUnauthorized, "proof_invalid"},
		{"optional, none", "optional", call, http.StatusOK, ""},
		{"optional, wrong audience", "optional", signed(t, stranger, "did:web:other.example", call), http.StatusUnauthorized, "proof_invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := polHandler(t, f, func(s *setup) { s.RequestProof = c.mode })
			res := polServe(t, h, polPost(c.body, ""), nil)
			if res.rec.Code != c.status || res.called != (c.status == http.StatusOK) {
				t.Fatalf("%d forwarded %v: %s", res.rec.Code, res.called, res.rec.Body)
			}
			if c.reason != "" && decodeProofRPC(t, res.rec).Error.Data.Reason != c.reason {
				t.Fatalf("%s", res.rec.Body)
			}
			if c.status == http.StatusOK && string(res.fwdBody) != c.body {
				t.Fatalf("body edited: %s", res.fwdBody)
			}
		})
	}
}

// TestAnonymousProofsCannotFillTheStore: proofs that no credential binds
// (self-made agents on an anonymous tool) fill a partition of the nonce
// store's bound of their own. When it is full they are refused with 503
// nonce_store_full (not nonce_store_unavailable: the store is up), and a
// credentialed caller's proof on the same route and store still admits.
func TestAnonymousProofsCannotFillTheStore(t *testing.T) {
	f := newFixture(t)
	store := challenge.NewMemoryStore(context.Background(), challenge.WithMaxEntries(2))
	t.Cleanup(func() { _ = store.Close() })
	h := polHandler(t, f, func(c *setup) {
		c.RequestProof = "required"
		useStore(store, "memory")(c)
	})
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusServiceUnavailable} {
		body := signed(t, newParty(t), testAudience, polCall(i, "public"))
		res := polServe(t, h, polPost(body, ""), nil)
		if res.rec.Code != want || res.called != (want == http.StatusOK) {
			t.Fatalf("anonymous proof %d: %d forwarded %v: %s", i, res.rec.Code, res.called, res.rec.Body)
		}
		if want != http.StatusOK {
			if got := decodeProofRPC(t, res.rec).Error.Data.Reasons; len(got) != 1 || got[0] != "nonce_store_full" {
				t.Fatalf("full partition reasons = %v, want [nonce_store_full]", got)
			}
		}
	}
	call := signed(t, f.agent, testAudience, polCall(10, "echo"))
	if res := polServe(t, h, polPost(call, f.jwt(t, nil)), nil); res.rec.Code != http.StatusOK || !res.called {
		t.Fatalf("credentialed proof beside a full anonymous partition: %d %s", res.rec.Code, res.rec.Body)
	}
	// A marker in either partition spends the nonce in both: a proof used
	// with the agent's credential, replayed without one, is a replay.
	body := signed(t, f.agent, testAudience, polCall(20, "public"))
	if res := polServe(t, h, polPost(body, f.jwt(t, nil)), nil); res.rec.Code != http.StatusOK {
		t.Fatalf("credentialed proof on the anonymous tool: %d %s", res.rec.Code, res.rec.Body)
	}
	res := polServe(t, h, polPost(body, ""), nil)
	if res.rec.Code != http.StatusUnauthorized || res.called || decodeProofRPC(t, res.rec).Error.Data.Reasons[0] != "nonce_replayed" {
		t.Fatalf("replayed without the credential: %d %s", res.rec.Code, res.rec.Body)
	}
}
