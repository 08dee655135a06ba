package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnboardingCaddyfiles: the Caddyfiles docs/onboarding.md shows (kept in
// docs/onboarding/, the doc and this test read the same files) adapt and
// validate with the plugin, are formatted as `caddy fmt` writes them, and
// turn the front door on: an mcpi handler with authorization_server and
// trust authorization_server, after the authentication handler that
// guards the consent page.
func TestOnboardingCaddyfiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "docs", "onboarding", "*.Caddyfile"))
	if err != nil || len(files) < 2 {
		t.Fatalf("want the onboarding Caddyfiles (basic_auth, forward_auth) in docs/onboarding, found %v (%v)", files, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(caddyBin, "adapt", "--config", file, "--adapter", "caddyfile", "--validate")
			cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir,
				// The built-in sign-in's settings, as the operator's environment holds them.
				"MCPI_OIDC_ISSUER=https://idp.example.com", "MCPI_OIDC_CLIENT_ID=mcp-edge", "MCPI_OIDC_CLIENT_SECRET=change-me")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("caddy adapt --validate: %v\n%s", err, stderr.String())
			}
			if strings.Contains(stderr.String(), "not formatted") {
				t.Errorf("%s is not formatted (caddy fmt --overwrite %s)", file, file)
			}
			var cfg any
			if err := json.Unmarshal(out, &cfg); err != nil {
				t.Fatalf("adapted config is not JSON: %v", err)
			}
			handlers := handlerNames(cfg)
			mcpi := -1
			for i, h := range handlers {
				if h.name == "mcpi" {
					mcpi = i
					if h.raw["authorization_server"] == nil || h.raw["trust_authorization_server"] != true {
						t.Errorf("the mcpi handler does not turn the front door on: %v", h.raw)
					}
				}
			}
			if mcpi < 0 {
				t.Fatalf("no mcpi handler in %s", out)
			}
			// basic_auth adapts to the "authentication" handler and
			// forward_auth to a reverse_proxy; either must come first,
			// unless the edge signs users in itself (sign_in).
			as, _ := handlers[max(mcpi, 0)].raw["authorization_server"].(map[string]any)
			if as["sign_in"] != nil {
				if mcpi != 0 {
					t.Errorf("handlers in order %v: with the built-in sign-in nothing need run before mcpi", names(handlers))
				}
			} else if mcpi == 0 || (handlers[0].name != "authentication" && handlers[0].name != "reverse_proxy") {
				t.Errorf("handlers in order %v: the sign-in must run before mcpi", names(handlers))
			}
		})
	}
}

type namedHandler struct {
	name string
	raw  map[string]any
}

// handlerNames lists the handlers of an adapted config in the order a
// depth-first walk meets them, which is the order a route runs them.
func handlerNames(v any) []namedHandler {
	var out []namedHandler
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if name, ok := v["handler"].(string); ok && name != "subroute" {
				out = append(out, namedHandler{name, v})
			}
			// Walk "routes" and "handle" in a fixed order; map order is random.
			for _, k := range []string{"apps", "http", "servers", "srv0", "routes", "handle"} {
				if c, ok := v[k]; ok {
					walk(c)
				}
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}

func names(hs []namedHandler) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.name)
	}
	return out
}
