package caddymodule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRotateKeyUnsetPlaceholder: `caddy mcpi rotate-key` with a config that
// names an environment variable this shell does not have, in a Caddyfile
// ({$NAME}) or in the storage ({env.NAME}), stops with an error naming the
// placeholder, and rotates nothing; with the variable set it rotates in the
// storage the variable names.
func TestRotateKeyUnsetPlaceholder(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // a storage root left unexpanded would be made here
	const caddyfile = `{
	storage file_system {$MCPI_TEST_STORAGE}
}
:0 {
	mcpi {
		trust any
		level 2
		key_storage_key {$MCPI_TEST_KEY:edge/keys.json}
	}
	respond ok
}
`
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cf := write("Caddyfile", caddyfile)
	cfg := write("caddy.json", `{"storage": {"module": "file_system", "root": "{env.MCPI_TEST_STORAGE}"}}`)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"Caddyfile", []string{"--config", cf}, "{$MCPI_TEST_STORAGE}"},
		{"Caddyfile, adapter named", []string{"--config", cf, "--adapter", "caddyfile"}, "{$MCPI_TEST_STORAGE}"},
		{"JSON storage", []string{"--config", cfg}, "{env.MCPI_TEST_STORAGE}"},
	} {
		_, _, err := runCmd(t, rotateKeyCommand(), "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "not set") {
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("the directory holds %d entries, want only the two configs", len(entries))
	}

	storage := filepath.Join(dir, "storage")
	t.Setenv("MCPI_TEST_STORAGE", storage)
	if out, _, err := runCmd(t, rotateKeyCommand(), "", "--config", cf); err != nil || !strings.Contains(out, `"storage_key": "edge/keys.json"`) {
		t.Fatalf("with the variable set: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(storage, "edge", "keys.json")); err != nil {
		t.Errorf("key set not in the storage the variable names: %v", err)
	}
}
