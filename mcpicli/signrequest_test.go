package mcpicli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// memStore accepts every nonce: replay is the verifier's test, not this one's.
type memStore struct{}

func (memStore) UseNonce(context.Context, string, string, time.Duration) error { return nil }

// TestSignRequestCommand: keygen's key signs a request read from stdin;
// the printed request verifies for the audience given and for no other,
// and its body outside _meta is the one given.
func TestSignRequestCommand(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "agent.jwk")
	var out bytes.Buffer
	kg := Keygen()
	kg.SetArgs([]string{"--out", keyFile})
	kg.SetOut(&out)
	if err := kg.Execute(); err != nil {
		t.Fatal(err)
	}
	did := strings.TrimSpace(out.String())
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"msg":"hi"}}}`
	cmd := SignRequest()
	out.Reset()
	cmd.SetArgs([]string{"--agent-key", keyFile, "--audience", "did:web:mcp.example.com"})
	cmd.SetIn(strings.NewReader(call))
	cmd.SetOut(&out)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	signed := bytes.TrimSpace(out.Bytes())
	if !bytes.HasPrefix(signed, []byte(call[:len(call)-2])) {
		t.Fatalf("body changed: %s", signed)
	}
	for aud, want := range map[string]kyaos.Reason{"did:web:mcp.example.com": "", "did:web:other": kyaos.AudienceMismatch} {
		v := kyaos.NewVerifier(didresolver.New(), memStore{})
		res, err := v.Verify(context.Background(), kyaos.Request{Body: signed, Audience: aud})
		if kyaos.ReasonOf(err) != want {
			t.Fatalf("%s: %v", aud, err)
		}
		if err == nil && res.Proof.DID != did {
			t.Fatalf("signed as %s, keygen said %s", res.Proof.DID, did)
		}
	}
	// Missing flags and a missing file are errors, not output.
	cmd = SignRequest()
	cmd.SetArgs([]string{"--audience", "did:web:x"})
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil {
		t.Fatal("no --agent-key accepted")
	}
	if _, err := os.Stat(keyFile); err != nil {
		t.Fatal(err)
	}
}
