package mcpicli

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

func run(t *testing.T, cmd interface {
	SetArgs([]string)
	Execute() error
}, args ...string) error {
	t.Helper()
	cmd.SetArgs(args)
	return cmd.Execute()
}

// TestDPoPProofCommand: the operator's path to a bound credential: the
// agent key's thumbprint and did:jwk, a credential issued bound to it,
// and a proof for one request that the edge's checker accepts.
func TestDPoPProofCommand(t *testing.T) {
	dir := t.TempDir()
	userKey, agentKey := filepath.Join(dir, "user.jwk"), filepath.Join(dir, "agent.jwk")
	var out bytes.Buffer
	for _, k := range []string{userKey, agentKey} {
		kg := Keygen()
		kg.SetOut(&out)
		if err := run(t, kg, "--out", k); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	tp := DPoPProof()
	tp.SetOut(&out)
	if err := run(t, tp, "--key", agentKey, "--thumbprint"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(out.String())
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "did:jwk:") {
		t.Fatalf("--thumbprint printed %q", out.String())
	}
	jkt, agentDID := lines[0], lines[1]

	out.Reset()
	is := Issue()
	is.SetOut(&out)
	if err := run(t, is, "--issuer-key", userKey, "--agent", agentDID, "--cnf-jkt", jkt, "--audience", "https://mcp.example.com"); err != nil {
		t.Fatal(err)
	}
	cred := strings.TrimSpace(out.String())
	d, err := vc.NewVerifier(didresolver.New()).Verify(context.Background(), []byte(cred), vc.ForAudience("https://mcp.example.com"))
	if err != nil || d.CnfJKT != jkt || d.AgentDID != agentDID {
		t.Fatalf("issued credential: %v, %+v", err, d)
	}

	out.Reset()
	pc := DPoPProof()
	pc.SetOut(&out)
	pc.SetIn(strings.NewReader(cred + "\n"))
	if err := run(t, pc, "--key", agentKey, "--method", "POST", "--url", "https://mcp.example.com/mcp?x=1", "--token", "-"); err != nil {
		t.Fatal(err)
	}
	store := challenge.NewMemoryStore(context.Background())
	defer store.Close()
	p, err := dpop.NewChecker(store).Check(context.Background(), strings.TrimSpace(out.String()),
		dpop.Expect{Method: http.MethodPost, URL: "https://mcp.example.com/mcp", AccessToken: cred, JKT: jkt})
	if err != nil || p.JKT != jkt {
		t.Fatalf("proof: %v", err)
	}

	for _, args := range [][]string{
		{"--thumbprint"},
		{"--key", agentKey},
		{"--key", filepath.Join(dir, "missing.jwk"), "--thumbprint"},
	} {
		if err := run(t, DPoPProof(), args...); err == nil {
			t.Errorf("dpop-proof %v: no error", args)
		}
	}
	if err := run(t, Issue(), "--issuer-key", userKey, "--agent", agentDID, "--cnf-jkt", "short", "--audience", "x"); err == nil {
		t.Error("issue took a --cnf-jkt that is no thumbprint")
	}
}
