package challenge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// A proxied challenge's record keeps a digest of the agent DID, not the
// DID: an anonymous handshake naming a 2 KB DID costs the store a few
// dozen bytes. The record still binds the challenge to that agent.
func TestRegisterKeepsAgentDigest(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	long := "did:key:z6Mk" + strings.Repeat("a", 2000)
	hr := HandshakeResult{Challenge: "a0b1c2d3e4f5a6b7c8d9", Nonce: "6789012345abcdef", ExpiresIn: 60}
	if err := f.svc.Register(ctx, long, hr); err != nil {
		t.Fatalf("Register: %v", err)
	}
	rec, err := f.store.Peek(ctx, hr.Nonce)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.AgentDID) > 64 || strings.Contains(rec.AgentDID, "aaaa") {
		t.Fatalf("the record keeps %d bytes of agent (%.80q…), want a digest", len(rec.AgentDID), rec.AgentDID)
	}
	if !IssuedTo(rec, long) || IssuedTo(rec, long+"b") || IssuedTo(rec, "") {
		t.Fatal("the digest does not bind the record to its agent alone")
	}
	// The answer of the agent it was issued to still verifies; another's
	// does not.
	a, b := newAgent(t, didresolver.Ed25519), newAgent(t, didresolver.Ed25519)
	hr = HandshakeResult{Challenge: "ffff0000", Nonce: "eeee1111", ExpiresIn: 60}
	if err := f.svc.Register(ctx, a.did, hr); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Verify(ctx, VerifyParams{SignedChallenge: answer(t, b, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, b.did)}); err == nil {
		t.Fatal("another agent's answer verified")
	}
	if _, err := f.svc.Verify(ctx, VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}); err != nil {
		t.Fatalf("the agent's answer: %v", err)
	}
}

// TestIssuedTo: a record holding the DID itself (written by an edge that
// kept it, sharing the store) binds as before; an empty one binds anyone.
func TestIssuedTo(t *testing.T) {
	did := "did:key:z6MkA"
	now := time.Now()
	for _, tc := range []struct {
		rec  Record
		did  string
		want bool
	}{
		{Record{AgentDID: agentRef(did), ExpiresAt: now}, did, true},
		{Record{AgentDID: agentRef(did)}, "did:key:z6MkB", false},
		{Record{AgentDID: did}, did, true},
		{Record{AgentDID: did}, "did:key:z6MkB", false},
		{Record{}, did, true},
		{Record{AgentDID: "sha256:"}, did, false},
		{Record{AgentDID: agentRef(did)}, agentRef(did), false}, // the digest is not a DID
	} {
		if got := IssuedTo(tc.rec, tc.did); got != tc.want {
			t.Errorf("IssuedTo(%q, %q) = %v, want %v", tc.rec.AgentDID, tc.did, got, tc.want)
		}
	}
}
