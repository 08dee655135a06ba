package caddymodule

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/mcpicli"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// cliIssuer signs credentials for the verify tests with a did:key.
type cliIssuer struct {
	t    *testing.T
	key  ed25519.PrivateKey
	did  string
	kid  string
	life time.Duration
}

func newCLIIssuer(t *testing.T) *cliIssuer {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	did, kid, err := didresolver.KeyDID(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return &cliIssuer{t: t, key: key, did: did, kid: kid, life: time.Hour}
}

// jwt issues a VC-JWT for aud ("": none).
func (is *cliIssuer) jwt(aud string, scopes ...string) string {
	is.t.Helper()
	var auds []string
	if aud != "" {
		auds = []string{aud}
	}
	now := time.Now()
	tok, err := vc.IssueJWT(is.key, is.kid, vc.Template{
		AgentDID: "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", Audience: auds,
		Scopes: scopes, NotBefore: now, ExpiresAt: now.Add(is.life),
	})
	if err != nil {
		is.t.Fatal(err)
	}
	return tok
}

// writeConfig writes a config into a temporary directory under name
// (a Caddyfile when name starts with Caddyfile, as `caddy run` decides).
func writeConfig(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCLIVerifyConfig(t *testing.T) {
	is := newCLIIssuer(t)
	other := newCLIIssuer(t)
	twoSites := writeConfig(t, "Caddyfile", `{
	admin off
}
http://mcp.example.com {
	mcpi {
		trust `+is.did+`
		max_credential_lifetime 2h
	}
	respond ok
}
http://files.example.com:8080 {
	mcpi {
		trust `+is.did+`
		audience did:web:files.example.com
		require_scopes files:write
	}
	respond ok
}
`)
	oneSite := writeConfig(t, "Caddyfile", `http://mcp.example.com {
	mcpi {
		trust `+other.did+`
	}
	respond ok
}
`)
	catchAll := writeConfig(t, "Caddyfile.catchall", `:8080 {
	mcpi {
		trust any
	}
	respond ok
}
`)
	pathRoutes := writeConfig(t, "Caddyfile", `http://mcp.example.com {
	handle /a/* {
		mcpi {
			trust any
		}
	}
	handle {
		mcpi {
			trust any
			require_presentation
		}
	}
	respond ok
}
`)
	twinSites := writeConfig(t, "Caddyfile", `http://mcp.example.com, http://mcp2.example.com {
	mcpi {
		trust `+is.did+`
	}
	respond ok
}
`)
	jsonConfig := writeConfig(t, "caddy.json", `{"apps": {"http": {"servers": {"srv0": {
	"listen": [":443"],
	"routes": [{"match": [{"host": ["api.example.com"]}], "handle": [
		{"handler": "mcpi", "trusted_issuers": ["`+is.did+`"], "require_audience": true}
	]}]
}}}}}`)

	mcpTok := is.jwt("did:web:mcp.example.com")
	filesTok := is.jwt("did:web:files.example.com", "files:write")
	filesNoScope := is.jwt("did:web:files.example.com", "files:read")
	is.life = 3 * time.Hour
	longTok := is.jwt("did:web:mcp.example.com")

	tests := []struct {
		name    string
		cred    string
		args    []string
		issuer  string // printed the delegation of this issuer (default: is)
		invalid string // first line of stderr
		detail  string // in stderr after it
		err     string // a usage or config error
	}{
		{name: "the only route, its trust", cred: mcpTok, args: []string{"--config", oneSite},
			invalid: "invalid: untrusted_issuer", detail: "not trusted"},
		{name: "the only route, host from its site", cred: other.jwt("did:web:mcp.example.com"), args: []string{"--config", oneSite}, issuer: other.did},
		{name: "two routes need --site", cred: mcpTok, args: []string{"--config", twoSites},
			err: "the config has 2 mcpi routes with different settings, choose one with --site: mcp.example.com (:80); files.example.com (:8080)"},
		{name: "route of the site", cred: mcpTok, args: []string{"--config", twoSites, "--site", "mcp.example.com"}},
		{name: "site with scheme", cred: mcpTok, args: []string{"--config", twoSites, "--site", "http://mcp.example.com"}},
		{name: "unknown site", cred: mcpTok, args: []string{"--config", twoSites, "--site", "www.example.com"},
			err: "no mcpi route serves www.example.com; the config's mcpi routes: mcp.example.com (:80); files.example.com (:8080)"},
		{name: "site on another port", cred: mcpTok, args: []string{"--config", twoSites, "--site", "files.example.com:9090"},
			err: "no mcpi route serves files.example.com:9090"},
		{name: "the route's audience", cred: filesTok, args: []string{"--config", twoSites, "--site", "mcp.example.com"},
			invalid: "invalid: wrong_audience"},
		{name: "the route's configured audience and scopes", cred: filesTok, args: []string{"--config", twoSites, "--site", "files.example.com:8080"}},
		{name: "the route's required scopes", cred: filesNoScope, args: []string{"--config", twoSites, "--site", "files.example.com:8080"},
			invalid: "invalid: missing_scope"},
		{name: "without --config the scope is not required", cred: filesNoScope,
			args: []string{"--trust", is.did, "--audience", "did:web:files.example.com"}},
		{name: "the route's lifetime limit", cred: longTok, args: []string{"--config", twoSites, "--site", "mcp.example.com"},
			invalid: "invalid: lifetime_too_long"},
		{name: "without --config no lifetime limit", cred: longTok, args: []string{"--audience", "did:web:mcp.example.com"}},
		{name: "catch-all site needs a host", cred: mcpTok, args: []string{"--config", catchAll, "--site", ":8080"},
			err: "derives its audiences from the Host of each request: name the host agents use with --site <host>[:<port>]"},
		{name: "catch-all site with a host", cred: is.jwt("did:web:mcp.example.com%3A8080"), args: []string{"--config", catchAll, "--site", "mcp.example.com:8080"}},
		{name: "catch-all site, host on the wrong port", cred: mcpTok, args: []string{"--config", catchAll, "--site", "mcp.example.com:8080"},
			invalid: "invalid: wrong_audience"},
		{name: "handlers of one site that differ", cred: mcpTok, args: []string{"--config", pathRoutes},
			err: "the config has 2 mcpi routes with different settings"},
		{name: "handlers of one site that differ, with --site", cred: mcpTok, args: []string{"--config", pathRoutes, "--site", "mcp.example.com"},
			err: "mcp.example.com has 2 mcpi handlers with different settings (mcp.example.com (:80); mcp.example.com (:80)): verify cannot tell which one a request meets"},
		{name: "one route, two hosts", cred: mcpTok, args: []string{"--config", twinSites},
			err: "the route mcp.example.com,mcp2.example.com (:80) derives its audiences from the Host of each request"},
		{name: "one route, two hosts, with --site", cred: mcpTok, args: []string{"--config", twinSites, "--site", "mcp.example.com"}},
		{name: "one route, two hosts, the other --site", cred: mcpTok, args: []string{"--config", twinSites, "--site", "mcp2.example.com"},
			invalid: "invalid: wrong_audience"},
		{name: "JSON config", cred: is.jwt("did:web:api.example.com"), args: []string{"--config", jsonConfig}},
		{name: "JSON config, route's require_audience", cred: is.jwt(""), args: []string{"--config", jsonConfig},
			invalid: "invalid: wrong_audience"},
		{name: "without --config no audience is required", cred: is.jwt(""), args: []string{"--trust", is.did}},
		{name: "--trust with --config", cred: mcpTok, args: []string{"--config", twoSites, "--trust", "any"},
			err: "--trust, --audience and --allow-private-did-web cannot be combined with --config"},
		{name: "--site without --config", cred: mcpTok, args: []string{"--site", "mcp.example.com"},
			err: "--site and --adapter need --config"},
		{name: "missing config", cred: mcpTok, args: []string{"--config", filepath.Join(t.TempDir(), "Caddyfile")},
			err: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, err := runCmd(t, verifyCommand(), tt.cred, append(tt.args, "-")...)
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
			case tt.invalid != "":
				first, rest, _ := strings.Cut(stderr, "\n")
				if !errors.Is(err, mcpicli.ErrInvalidCredential) || out != "" || first != tt.invalid || !strings.Contains(rest, tt.detail) {
					t.Fatalf("out %q stderr %q err %v, want %q then %q", out, stderr, err, tt.invalid, tt.detail)
				}
			default:
				want := tt.issuer
				if want == "" {
					want = is.did
				}
				var d struct {
					Issuer string `json:"issuer"`
				}
				if err != nil || json.Unmarshal([]byte(out), &d) != nil || d.Issuer != want {
					t.Fatalf("out %q stderr %q err %v, want the delegation", out, stderr, err)
				}
			}
		})
	}
}

// TestCLIVerifyInlineContext: a JSON-LD credential with an inline context
// is refused with unsupported_format, and the command says why and what
// can be done, not that a context is "not available".
func TestCLIVerifyInlineContext(t *testing.T) {
	is := newCLIIssuer(t)
	now := time.Now()
	raw, err := vc.IssueJSON(is.key, is.kid, vc.Template{AgentDID: "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
		Audience: []string{"did:web:mcp.example.com"}, NotBefore: now, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	// A Linked Data proof (which is checked for inline contexts before
	// its signature), and a context object.
	m["@context"] = append(m["@context"].([]any), map[string]any{"@vocab": "https://example.com/vocab#"})
	m["proof"].(map[string]any)["type"] = "Ed25519Signature2018"
	b, _ := json.Marshal(m)

	_, stderr, err := runCmd(t, verifyCommand(), string(b), "--trust", is.did, "--audience", "did:web:mcp.example.com", "-")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if !errors.Is(err, mcpicli.ErrInvalidCredential) || len(lines) != 3 || lines[0] != "invalid: unsupported_format" ||
		!strings.Contains(lines[1], "inline JSON-LD context refused: the signature does not cover it") ||
		strings.Contains(stderr, "not available") || !strings.Contains(lines[2], "jsonld_context <url> <file>") {
		t.Fatalf("stderr %q, err %v", stderr, err)
	}
}
