package caddymodule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIDelegationsMemoryStore: with the memory nonce store, list reads
// the storage (nothing yet: an empty JSON list) and revoke refuses, saying
// where revocations can be made instead.
func TestCLIDelegationsMemoryStore(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Caddyfile")
	caddyfile := `{
	storage file_system {
		root ` + filepath.Join(dir, "storage") + `
	}
}
:8080 {
	mcpi {
		authorization_server
		trust authorization_server
	}
}
`
	if err := os.WriteFile(cfg, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCmd(t, delegationsCommand(), "", "list", "--config", cfg, "--adapter", "caddyfile")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list: %q %v", out, err)
	}
	_, _, err = runCmd(t, delegationsCommand(), "", "revoke", strings.Repeat("A", 22), "--config", cfg, "--adapter", "caddyfile")
	if err == nil || !strings.Contains(err.Error(), "memory nonce store") || !strings.Contains(err.Error(), "/oauth/delegations") {
		t.Fatalf("revoke with the memory store: %v", err)
	}
	_, _, err = runCmd(t, delegationsCommand(), "", "list", "--user", "not-an-id", "--config", cfg, "--adapter", "caddyfile")
	if err == nil || !strings.Contains(err.Error(), "not a user id") {
		t.Fatalf("list --user with a malformed id: %v", err)
	}
}
