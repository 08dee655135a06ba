package integration

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestValidateCreatesNothing: `caddy validate` (and `caddy adapt
// --validate`) on a config whose edge keeps keys in Caddy's storage (the
// signing key set, the Level 3 session key) says the config is valid and
// leaves the storage as it found it.
func TestValidateCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	storage := filepath.Join(dir, "storage")
	site := level2Site(freePort(t), "127.0.0.1:9", "level 3\nhandshake terminate")
	caddyfile := testCaddyfile(freePort(t), storage, site)
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"validate", "--config", path, "--adapter", "caddyfile"},
		{"adapt", "--config", path, "--adapter", "caddyfile", "--validate"},
	} {
		cmd := exec.Command(caddyBin, args...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("caddy %s: %v\n%s", args[0], err, out)
		}
		var made []string
		_ = filepath.WalkDir(storage, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				made = append(made, p)
			}
			return nil
		})
		if len(made) > 0 {
			t.Fatalf("caddy %s created %v", args[0], made)
		}
	}
}
