package caddymodule

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/mcpi-edge/caddy-mcpi/edge"
)

const testDID = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"

func TestUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    Handler
		wantErr string // substring of the parse error
	}{
		{
			name:  "trust any",
			input: "mcpi {\n trust any\n}",
			want:  Handler{Config: edge.Config{TrustedIssuers: []string{"*"}}},
		},
		{
			name: "every subdirective",
			input: `mcpi {
				level 1
				trust ` + testDID + ` did:web:issuer.example.com
				audience did:web:api.example.com https://api.example.com
				require_audience
				require_scopes tools:read echo:execute
				carriers authorization kya_delegation delegation_token
				non_delegation_bearer reject
				clock_skew 30s
				max_credential_size 32KiB
				max_body_size 2MB
				did_cache_ttl 10m
				did_web_timeout 2s
				allow_private_did_web
				authorization_servers https://auth.example.com https://auth2.example.com
				passthrough_credential
			}`,
			want: Handler{
				Config: edge.Config{
					Level:                 1,
					TrustedIssuers:        []string{testDID, "did:web:issuer.example.com"},
					Audiences:             []string{"did:web:api.example.com", "https://api.example.com"},
					RequireAudience:       true,
					RequiredScopes:        []string{"tools:read", "echo:execute"},
					Carriers:              []string{"authorization", "kya_delegation", "delegation_token"},
					NonDelegationBearer:   "reject",
					ClockSkew:             edge.Duration(30 * time.Second),
					MaxCredentialSize:     32 << 10,
					MaxBodySize:           2_000_000,
					DIDCacheTTL:           edge.Duration(10 * time.Minute),
					DIDWebTimeout:         edge.Duration(2 * time.Second),
					AllowPrivateDIDWeb:    true,
					AuthorizationServers:  []string{"https://auth.example.com", "https://auth2.example.com"},
					PassthroughCredential: true,
				},
			},
		},
		{name: "sizes in plain bytes", input: "mcpi {\n trust any\n max_body_size 4096\n}", want: Handler{Config: edge.Config{TrustedIssuers: []string{"*"}, MaxBodySize: 4096}}},
		{name: "durations with days", input: "mcpi {\n trust any\n did_cache_ttl 1d\n}", want: Handler{Config: edge.Config{TrustedIssuers: []string{"*"}, DIDCacheTTL: edge.Duration(24 * time.Hour)}}},
		{name: "level 2 parses, Validate refuses", input: "mcpi {\n trust any\n level 2\n}", want: Handler{Config: edge.Config{TrustedIssuers: []string{"*"}, Level: 2}}},
		{name: "no block", input: "mcpi", want: Handler{}},

		{name: "argument on the directive", input: "mcpi foo {\n trust any\n}", wantErr: "wrong argument count"},
		{name: "unknown subdirective", input: "mcpi {\n trust any\n trusted any\n}", wantErr: `unrecognized mcpi subdirective "trusted"`},
		{name: "duplicate subdirective", input: "mcpi {\n trust any\n trust " + testDID + "\n}", wantErr: "trust already specified"},
		{name: "duplicate flag", input: "mcpi {\n require_audience\n require_audience\n}", wantErr: "require_audience already specified"},
		{name: "trust without args", input: "mcpi {\n trust\n}", wantErr: "wrong argument count"},
		{name: "trust any mixed", input: "mcpi {\n trust any " + testDID + "\n}", wantErr: "trust any must stand alone"},
		{name: "level without arg", input: "mcpi {\n level\n}", wantErr: "wrong argument count"},
		{name: "level two args", input: "mcpi {\n level 1 2\n}", wantErr: "wrong argument count"},
		{name: "bad level", input: "mcpi {\n level one\n}", wantErr: "level must be 1, 2 or 3"},
		{name: "level out of range", input: "mcpi {\n level 4\n}", wantErr: "level must be 1, 2 or 3"},
		{name: "audience without args", input: "mcpi {\n audience\n}", wantErr: "wrong argument count"},
		{name: "require_audience with arg", input: "mcpi {\n require_audience yes\n}", wantErr: "wrong argument count"},
		{name: "require_scopes without args", input: "mcpi {\n require_scopes\n}", wantErr: "wrong argument count"},
		{name: "unknown carrier", input: "mcpi {\n carriers authorization cookie\n}", wantErr: `unknown carrier "cookie"`},
		{name: "carrier twice", input: "mcpi {\n carriers authorization authorization\n}", wantErr: "listed twice"},
		{name: "carriers without args", input: "mcpi {\n carriers\n}", wantErr: "wrong argument count"},
		{name: "bad bearer mode", input: "mcpi {\n non_delegation_bearer drop\n}", wantErr: "pass or reject"},
		{name: "bearer mode without arg", input: "mcpi {\n non_delegation_bearer\n}", wantErr: "wrong argument count"},
		{name: "bad duration", input: "mcpi {\n clock_skew soon\n}", wantErr: `clock_skew: invalid duration "soon"`},
		{name: "negative duration", input: "mcpi {\n did_web_timeout -1s\n}", wantErr: "did_web_timeout: duration must be positive"},
		{name: "duration without arg", input: "mcpi {\n did_cache_ttl\n}", wantErr: "wrong argument count"},
		{name: "bad size", input: "mcpi {\n max_body_size lots\n}", wantErr: `max_body_size: invalid size "lots"`},
		{name: "zero size", input: "mcpi {\n max_credential_size 0\n}", wantErr: "max_credential_size: size must be between"},
		{name: "huge size", input: "mcpi {\n max_body_size 8GiB\n}", wantErr: "size must be between"},
		{name: "size two args", input: "mcpi {\n max_body_size 1 MB\n}", wantErr: "wrong argument count"},
		{name: "authorization_servers without args", input: "mcpi {\n authorization_servers\n}", wantErr: "wrong argument count"},
		{name: "passthrough with arg", input: "mcpi {\n passthrough_credential on\n}", wantErr: "wrong argument count"},
		{name: "verification cache size", input: "mcpi {\n trust any\n verification_cache 500\n}", want: Handler{Config: edge.Config{TrustedIssuers: []string{"*"}, VerificationCacheSize: 500}}},
		{name: "verification cache off", input: "mcpi {\n trust any\n verification_cache off\n}", want: Handler{Config: edge.Config{TrustedIssuers: []string{"*"}, VerificationCacheSize: -1}}},
		{name: "verification cache zero", input: "mcpi {\n verification_cache 0\n}", wantErr: "positive number of entries or off"},
		{name: "verification cache no arg", input: "mcpi {\n verification_cache\n}", wantErr: "wrong argument count"},
		{name: "allow_private_did_web with arg", input: "mcpi {\n allow_private_did_web true\n}", wantErr: "wrong argument count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := parseForTest(t, tt.input, tt.wantErr, false)
			if !ok {
				return
			}
			if !reflect.DeepEqual(h, tt.want) {
				t.Errorf("got  %+v\nwant %+v", h, tt.want)
			}
		})
	}
}

// parseForTest parses input as an mcpi block, and validates it when
// validate is set. With wantErr it checks the error contains wantErr and
// returns ok false: the row ends there. Without, any error fails the test.
func parseForTest(t *testing.T, input, wantErr string, validate bool) (h Handler, ok bool) {
	t.Helper()
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
	if err == nil && validate {
		err = h.Validate()
	}
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want one containing %q", err, wantErr)
		}
		return h, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return h, true
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		wantErr string
	}{
		{name: "trust any", input: "mcpi {\n trust any\n}"},
		{name: "trust DIDs", input: "mcpi {\n trust " + testDID + " did:web:issuer.example.com\n}"},
		{name: "trust missing", input: "mcpi {\n audience https://api.example.com\n}", wantErr: edge.ErrTrustRequired.Error()},
		{name: "no block", input: "mcpi", wantErr: edge.ErrTrustRequired.Error()},
		{name: "trust not a DID", input: "mcpi {\n trust alice\n}", wantErr: `trusted issuer "alice"`},
		{name: "relative authorization server", input: "mcpi {\n trust any\n authorization_servers /auth\n}", wantErr: "not an absolute URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Handler
			if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input)); err != nil {
				t.Fatal(err)
			}
			err := h.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}

	// JSON configs skip the parser: Validate checks what it would have.
	for _, h := range []Handler{
		{Config: edge.Config{TrustedIssuers: []string{"*"}, NonDelegationBearer: "drop"}},
		{Config: edge.Config{TrustedIssuers: []string{"*"}, Carriers: []string{"cookie"}}},
		{Config: edge.Config{TrustedIssuers: []string{"*", testDID}}},
		{Config: edge.Config{TrustedIssuers: []string{"*"}, Level: 7}},
		{Config: edge.Config{TrustedIssuers: []string{"*"}, ClockSkew: -1}},
		{Config: edge.Config{TrustedIssuers: []string{"*"}, MaxBodySize: -1}},
		{Config: edge.Config{TrustedIssuers: []string{"*"}, RequiredScopes: []string{""}}},
	} {
		if err := h.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", h)
		}
	}
}

// TestCaddyfileAdapt checks testdata/caddyfile_adapt/*.caddyfiletest: a
// Caddyfile, a line of dashes, and the JSON it must adapt to.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/caddyfile_adapt/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			caddyfileText, expected, ok := strings.Cut(string(data), "\n----------\n")
			if !ok {
				t.Fatal("no ---------- separator")
			}
			// As Caddy's own adapt tests do: the formatter wants a final
			// newline, the JSON comparison none.
			caddyfileText = strings.TrimSpace(caddyfileText) + "\n"
			expected = strings.TrimSpace(expected)
			if !caddytest.CompareAdapt(t, file, caddyfileText, "caddyfile", expected) {
				t.Error("adapted JSON differs (diff above)")
			}
		})
	}
}
