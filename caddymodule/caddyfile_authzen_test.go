package caddymodule

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/authzen"
)

func TestCaddyfileAuthZEN(t *testing.T) {
	t.Setenv("PDP_TOKEN", "tok")
	t.Setenv("PDP_KEY", "key")
	for _, tt := range []struct {
		name, input, wantErr string
		want                 *authzen.Config
	}{
		{name: "all settings", input: "mcpi {\n trust any\n authzen http://127.0.0.1:8181 {\n  timeout 250ms\n  cache_ttl 30s\n  cache_size 500\n  allow_private\n  message \"Ask your admin.\"\n }\n}",
			want: &authzen.Config{URL: "http://127.0.0.1:8181", Timeout: edge.Duration(250 * time.Millisecond), CacheTTL: edge.Duration(30 * time.Second),
				CacheSize: 500, AllowPrivate: true, Message: "Ask your admin."}},
		{name: "url only", input: "mcpi {\n trust any\n authzen https://pdp.example.com/access/v1/evaluation\n}",
			want: &authzen.Config{URL: "https://pdp.example.com/access/v1/evaluation"}},
		{name: "no url", input: "mcpi {\n authzen\n}", wantErr: "authzen takes the URL"},
		{name: "twice", input: "mcpi {\n authzen https://a.example\n authzen https://b.example\n}", wantErr: "authzen already specified"},
		{name: "plain http without allow_private", input: "mcpi {\n authzen http://pdp.example.com\n}", wantErr: "allow_private"},
		{name: "bad cache size", input: "mcpi {\n authzen https://a.example {\n  cache_size -3\n }\n}", wantErr: "cache_size must be a positive number"},
		{name: "timeout too long", input: "mcpi {\n authzen https://a.example {\n  timeout 5m\n }\n}", wantErr: "timeout must be between"},
		{name: "unknown setting", input: "mcpi {\n authzen https://a.example {\n  ttl 5s\n }\n}", wantErr: `unrecognized setting "ttl"`},
		{name: "bearer", input: "mcpi {\n trust any\n authzen https://a.example {\n  bearer {env.PDP_TOKEN}\n }\n}",
			want: &authzen.Config{URL: "https://a.example", Bearer: "{env.PDP_TOKEN}"}},
		{name: "header", input: "mcpi {\n trust any\n authzen https://a.example {\n  header X-Api-Key {env.PDP_KEY}\n }\n}",
			want: &authzen.Config{URL: "https://a.example", Header: &authzen.Header{Name: "X-Api-Key", Value: "{env.PDP_KEY}"}}},
		{name: "bearer and header", input: "mcpi {\n authzen https://a.example {\n  bearer t\n  header X-Api-Key k\n }\n}", wantErr: "bearer or header, not both"},
		{name: "bearer without token", input: "mcpi {\n authzen https://a.example {\n  bearer\n }\n}", wantErr: "bearer takes the token"},
		{name: "header without value", input: "mcpi {\n authzen https://a.example {\n  header X-Api-Key\n }\n}", wantErr: "header takes a name and a value"},
		{name: "header of the request", input: "mcpi {\n authzen https://a.example {\n  header content-type k\n }\n}", wantErr: "a header of the request itself"},
		{name: "header name", input: "mcpi {\n authzen https://a.example {\n  header \"X Key\" k\n }\n}", wantErr: "is not a header name"},
		{name: "bearer with a space", input: "mcpi {\n authzen https://a.example {\n  bearer \"a b\"\n }\n}", wantErr: "without spaces"},
		{name: "setting twice", input: "mcpi {\n authzen https://a.example {\n  allow_private\n  allow_private\n }\n}", wantErr: "allow_private already specified"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := parseForTest(t, tt.input, tt.wantErr, true)
			if !ok {
				return
			}
			if !reflect.DeepEqual(h.AuthZEN, tt.want) {
				t.Errorf("got %+v, want %+v", h.AuthZEN, tt.want)
			}
		})
	}
}

// TestAuthZENCredentialPlaceholders: the PDP's credential is taken from
// the environment at provision, in the edge's copy only; an unset
// variable fails provisioning naming the setting, and no error holds the
// secret.
func TestAuthZENCredentialPlaceholders(t *testing.T) {
	t.Setenv("PDP_TOKEN", "s3cret-token")
	t.Setenv("PDP_KEY", "s3cret-key")
	cfg := edge.Config{}
	cfg.AuthZEN = &authzen.Config{URL: "https://a.example", Bearer: "{env.PDP_TOKEN}"}
	orig := cfg.AuthZEN
	if err := resolveAuthZEN(&cfg); err != nil || cfg.AuthZEN.Bearer != "s3cret-token" {
		t.Fatalf("bearer resolved to %q, %v", cfg.AuthZEN.Bearer, err)
	}
	if orig.Bearer != "{env.PDP_TOKEN}" {
		t.Errorf("the configuration now holds the secret: %q", orig.Bearer)
	}
	cfg.AuthZEN = &authzen.Config{URL: "https://a.example", Header: &authzen.Header{Name: "X-Api-Key", Value: "{env.PDP_KEY}"}}
	orig = cfg.AuthZEN
	if err := resolveAuthZEN(&cfg); err != nil || cfg.AuthZEN.Header.Value != "s3cret-key" || orig.Header.Value != "{env.PDP_KEY}" {
		t.Fatalf("header resolved to %+v (configuration %+v), %v", cfg.AuthZEN.Header, orig.Header, err)
	}
	cfg.AuthZEN = &authzen.Config{URL: "https://a.example", Bearer: "{env.PDP_UNSET_FOR_TEST}"}
	if err := resolveAuthZEN(&cfg); err == nil || !strings.Contains(err.Error(), "authzen bearer") {
		t.Fatalf("an unset variable: %v, want an error naming authzen bearer", err)
	}
	// The resolved value is checked as a written one, and the error does
	// not repeat it.
	t.Setenv("PDP_TOKEN", "bad\ntoken")
	cfg.AuthZEN = &authzen.Config{URL: "https://a.example", Bearer: "{env.PDP_TOKEN}"}
	if err := resolveAuthZEN(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || strings.Contains(err.Error(), "token") && strings.Contains(err.Error(), "bad") {
		t.Fatalf("a bearer with a newline: %v, want an error without the value", err)
	}
}
