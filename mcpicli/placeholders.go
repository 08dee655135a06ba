package mcpicli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// envPlaceholder matches the environment placeholders of a config:
// {env.NAME}, expanded by a module when it reads the value, and the
// Caddyfile's {$NAME} or {$NAME:default}, expanded when the Caddyfile is
// adapted (group 3 is the default, with its colon).
var envPlaceholder = regexp.MustCompile(`\{(?:env\.([A-Za-z_][A-Za-z0-9_]*)|\$([A-Za-z_][A-Za-z0-9_]*)(:[^}]*)?)\}`)

// unsetPlaceholders returns, each once and in order, the placeholders of
// text whose environment variable this process does not have: {env.NAME}
// always, {$NAME} only when adapted is true (text is a Caddyfile) and it
// has no default.
func unsetPlaceholders(text string, adapted bool) []string {
	var out []string
	for _, m := range envPlaceholder.FindAllStringSubmatch(text, -1) {
		name := m[1]
		if name == "" {
			if !adapted || m[3] != "" {
				continue
			}
			name = m[2]
		}
		if _, set := os.LookupEnv(name); !set && !slices.Contains(out, m[0]) {
			out = append(out, m[0])
		}
	}
	return out
}

// isCaddyfile reports whether LoadConfig adapts configFile as a Caddyfile:
// the caddyfile adapter named, or none and a file named like one.
func isCaddyfile(configFile, adapter string) bool {
	if adapter != "" {
		return adapter == "caddyfile"
	}
	base := strings.ToLower(filepath.Base(configFile))
	return filepath.Ext(base) != ".json" && (strings.HasPrefix(base, "caddyfile") || strings.HasSuffix(base, ".caddyfile"))
}

// checkConfigPlaceholders refuses a Caddyfile that names an environment
// variable ({$NAME}, no default) this process does not have: adapted here
// it would be another config than the server's (another storage, another
// key_storage_key), and the key would be rotated where the server never
// looks.
func checkConfigPlaceholders(configFile, adapter string) error {
	if configFile == "" || !isCaddyfile(configFile, adapter) {
		return nil
	}
	data, err := os.ReadFile(configFile)
	if err != nil {
		return nil // LoadConfig says why
	}
	return unsetError("the config", unsetPlaceholders(string(data), true))
}

// checkStoragePlaceholders refuses a storage config that names an
// environment variable ({env.NAME}) this process does not have: the
// storage would be another one than the server's.
func checkStoragePlaceholders(storageJSON []byte) error {
	return unsetError("the config's storage", unsetPlaceholders(string(storageJSON), false))
}

func unsetError(where string, unset []string) error {
	if len(unset) == 0 {
		return nil
	}
	return fmt.Errorf("%s uses %s, not set in this environment: run caddy mcpi rotate-key with the environment the server runs with (or give the Caddyfile placeholder a default, {$NAME:value})",
		where, strings.Join(unset, ", "))
}
