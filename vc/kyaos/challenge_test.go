package kyaos

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// TestSignedChallenge: the challenge verifies against the edge key, its
// responseHash binds the consent URL (a changed URL breaks it), and it
// states its outcome and scope.
func TestSignedChallenge(t *testing.T) {
	priv, _ := didresolver.GenerateKey(didresolver.Ed25519)
	key := priv.(ed25519.PrivateKey)
	now := time.Unix(1_800_000_000, 0)
	tok := NewResumeToken()
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(tok) {
		t.Fatalf("resume token %q", tok)
	}
	req := []byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"pay","arguments":{}}}`)
	s := ResponseSigner{Key: key, DID: "did:web:edge", KID: "did:web:edge#k"}
	res, err := s.SignChallenge(req, "did:key:zA", Challenge{Tool: "pay", ScopeID: "pay:execute",
		AuthorizationURL: "https://consent.example/a?x=1", ResumeToken: tok, ExpiresAt: now.Unix() + 300}, now.Unix())
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		ResultType string
		Content    json.RawMessage
	}
	if err := json.Unmarshal(res, &r); err != nil || r.ResultType != "complete" {
		t.Fatalf("%s %v", res, err)
	}
	check := ResponseCheck{Key: key.Public(), Now: now, Request: req, Response: r.Content}
	p, err := VerifyResponse(context.Background(), FindResponseProof(res), check)
	if err != nil {
		t.Fatal(err)
	}
	if p.Meta.Outcome != OutcomeNeedsAuthorization || p.Meta.ScopeID != "pay:execute" || !strings.Contains(p.Meta.Reason, `"pay"`) {
		t.Fatalf("meta %+v", p.Meta)
	}
	if !strings.Contains(string(r.Content), tok) {
		t.Fatal("resume token not in the signed content")
	}
	check.Response = []byte(strings.Replace(string(r.Content), "consent.example", "evil.example", 1))
	if _, err := VerifyResponse(context.Background(), FindResponseProof(res), check); ReasonOf(err) != ContentBindingMismatch {
		t.Fatalf("swapped URL: %v", err)
	}
}
