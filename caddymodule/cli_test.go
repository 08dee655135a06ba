package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/mcpicli"
	"github.com/spf13/cobra"
)

func runCmd(t *testing.T, cmd *cobra.Command, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestCLIKeygenIssueVerify(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "issuer.jwk")

	issuerDID, _, err := runCmd(t, mcpicli.Keygen(), "", "--out", keyFile)
	if err != nil || !strings.HasPrefix(issuerDID, "did:key:z6Mk") {
		t.Fatalf("keygen --out: %q %v", issuerDID, err)
	}
	issuerDID = strings.TrimSpace(issuerDID)
	if _, _, err := runCmd(t, mcpicli.Keygen(), "", "--out", keyFile); err == nil {
		t.Error("keygen overwrote an existing key file")
	}

	out, _, err := runCmd(t, mcpicli.Keygen(), "", "--type", "p256")
	if err != nil {
		t.Fatal(err)
	}
	var agent struct {
		DID        string         `json:"did"`
		KID        string         `json:"kid"`
		PrivateJWK map[string]any `json:"private_jwk"`
	}
	if err := json.Unmarshal([]byte(out), &agent); err != nil || !strings.HasPrefix(agent.DID, "did:key:zDn") || agent.PrivateJWK["crv"] != "P-256" {
		t.Fatalf("keygen output %s: %v", out, err)
	}

	for _, format := range []string{"jwt", "json"} {
		cred, _, err := runCmd(t, mcpicli.Issue(), "", "--issuer-key", keyFile, "--agent", agent.DID,
			"--audience", "https://mcp.example.com,did:web:mcp.example.com", "--scopes", "a:read,b:write", "--ttl", "10m", "--format", format)
		if err != nil {
			t.Fatalf("issue --format %s: %v", format, err)
		}

		out, _, err = runCmd(t, verifyCommand(), cred, "--trust", issuerDID, "--audience", "https://mcp.example.com", "-")
		if err != nil {
			t.Fatalf("verify %s: %v", format, err)
		}
		var d struct {
			AgentDID string   `json:"agent_did"`
			Issuer   string   `json:"issuer"`
			Scopes   []string `json:"scopes"`
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil || d.AgentDID != agent.DID || d.Issuer != issuerDID || strings.Join(d.Scopes, " ") != "a:read b:write" {
			t.Errorf("verify %s printed %s", format, out)
		}

		cmd := verifyCommand()
		out, stderr, err := runCmd(t, cmd, cred, "--trust", agent.DID, "--audience", "https://mcp.example.com", "-")
		if !errors.Is(err, mcpicli.ErrInvalidCredential) || out != "" || stderr != "invalid: untrusted_issuer\n  vc: credential issuer not trusted\n" {
			t.Errorf("verify untrusted: out %q stderr %q err %v", out, stderr, err)
		}
		if !cmd.SilenceErrors {
			t.Error("cobra would print the error a second time")
		}
	}

	if _, _, err := runCmd(t, mcpicli.Issue(), "", "--issuer-key", keyFile, "--agent", agent.DID); err == nil {
		t.Error("issue without --audience succeeded")
	}
	// The did:key of the identity point: a small-order key no one holds
	// the secret of, so anyone could present a credential issued to it.
	const smallOrderDID = "did:key:z6MkeXATEjyXENzBXBxgC5EHk2JE5aqd7qMGGtDpLUH1e2Sj"
	for _, format := range []string{"jwt", "json"} {
		out, _, err := runCmd(t, mcpicli.Issue(), "", "--issuer-key", keyFile, "--agent", smallOrderDID,
			"--audience", "https://mcp.example.com", "--format", format)
		issued := strings.Contains(out, "eyJ") || strings.Contains(out, `"proof"`) // cobra prints only the usage
		if err == nil || issued || !strings.Contains(err.Error(), "small-order") {
			t.Errorf("issue --format %s to a small-order did:key: out %q err %v", format, out, err)
		}
	}
}
