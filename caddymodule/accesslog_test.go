package caddymodule

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// accessLogWarning is one warning of warnAccessLog as Caddy wrote it.
type accessLogWarning struct {
	Msg       string          `json:"msg"`
	Headers   []string        `json:"headers"`
	Logs      []string        `json:"logs"`
	Caddyfile string          `json:"caddyfile"`
	JSON      json.RawMessage `json:"json"`
	Note      string          `json:"note"`
}

// provisionForWarnings provisions cfgJSON for real (caddy.Validate: every
// app and module, nothing listening) with the mcpi handler's own log sent
// to a file, and returns the access log warnings written there.
func provisionForWarnings(t *testing.T, cfgJSON []byte, logFile string) []accessLogWarning {
	t.Helper()
	var cfg caddy.Config
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&cfg); err != nil {
		t.Fatalf("provisioning: %v\n%s", err, cfgJSON)
	}
	f, err := os.Open(logFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []accessLogWarning
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var w accessLogWarning
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if strings.HasPrefix(w.Msg, "mcpi: the access log records credential headers") {
			out = append(out, w)
		}
	}
	return out
}

// caddyfileWarnings adapts sites (with global options that keep Caddy
// off the network and route the mcpi handler's log to a file) and
// provisions the result.
func caddyfileWarnings(t *testing.T, globals, sites string) []accessLogWarning {
	t.Helper()
	dir := t.TempDir()
	logFile := filepath.Join(dir, "mcpi.log")
	cf := fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
	storage file_system %s
	log mcpi {
		include http.handlers.mcpi
		output file %s
		format json
	}
%s
}
%s`, filepath.Join(dir, "storage"), logFile, globals, sites)
	cfgJSON, warns, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	warns = slices.DeleteFunc(warns, func(w caddyconfig.Warning) bool { return strings.Contains(w.Message, "not formatted") })
	if err != nil || len(warns) > 0 {
		t.Fatalf("adapting: %v %v\n%s", err, warns, cf)
	}
	return provisionForWarnings(t, cfgJSON, logFile)
}

var allCredentialHeaders = []string{"Kya-Delegation", "Kya-Os-Delegation-Credential", "Mcp-I-Credential", "Kya-Os-Delegation-Chain"}

func TestAccessLogWarning(t *testing.T) {
	const mcpi = "mcpi {\n\t\ttrust any\n\t}"
	tests := []struct {
		name, globals, sites string
		want                 []string // headers named; nil: no warning
	}{
		{
			name:  "log without filter",
			sites: "http://mcp.example.com {\n\tlog\n\t" + mcpi + "\n\trespond ok\n}",
			want:  allCredentialHeaders,
		},
		{
			name: "log with the warning's snippet",
			sites: "http://mcp.example.com {\n" + indent(filterSnippet(allCredentialHeaders)) +
				"\n\t" + mcpi + "\n\trespond ok\n}",
		},
		{
			name:  "no log",
			sites: "http://mcp.example.com {\n\t" + mcpi + "\n\trespond ok\n}",
		},
		{
			name: "filter deletes the request headers, wrapping console",
			sites: `http://mcp.example.com {
	log {
		format filter {
			wrap console
			fields {
				request>headers delete
			}
		}
	}
	` + mcpi + `
	respond ok
}`,
		},
		{
			name: "filter misses a header, or only masks IPs",
			sites: `http://mcp.example.com {
	log {
		format filter {
			request>headers>Kya-Delegation delete
			request>headers>Kya-Os-Delegation-Credential hash
			request>headers>Kya-Os-Delegation-Chain replace REDACTED
			request>remote_ip ip_mask 16 32
		}
	}
	` + mcpi + `
	respond ok
}`,
			want: []string{"Mcp-I-Credential"},
		},
		{
			name: "carriers Caddy does not log",
			sites: `http://mcp.example.com {
	log
	mcpi {
		trust any
		carriers authorization delegation_token mcpi_delegation
	}
	respond ok
}`,
		},
		{
			name:    "log_credentials logs Authorization",
			globals: "\tservers {\n\t\tlog_credentials\n\t}",
			sites: `http://mcp.example.com {
	log
	mcpi {
		trust any
		carriers authorization kya_delegation
	}
	respond ok
}`,
			want: []string{"Authorization", "Kya-Delegation"},
		},
		{
			name: "level 3 session header",
			sites: `http://mcp.example.com {
	log
	mcpi {
		level 3
		trust any
		carriers kya_delegation
	}
	respond ok
}`,
			want: []string{"Kya-Delegation", "X-Mcpi-Handshake-Session"},
		},
		{
			name: "another site of the server logs",
			sites: `http://logged.example.com {
	log
	respond ok
}
http://mcp.example.com {
	` + mcpi + `
	respond ok
}`,
		},
		{
			// Caddy's skip_hosts keep a site's port, and a request's Host is
			// compared without it: the site's requests go to the default log.
			name: "another site of the server logs, on a port of its own",
			sites: `http://logged.example.com:8080 {
	log {
		output discard
	}
	respond ok
}
http://mcp.example.com:8080 {
	` + mcpi + `
	respond ok
}`,
			want: allCredentialHeaders,
		},
		{
			name: "the default log takes the site's access log",
			sites: `http://mcp.example.com {
	log {
		output stderr
	}
	` + mcpi + `
	respond ok
}`,
			want: allCredentialHeaders,
		},
		{
			name:    "filtered site log, default log too",
			globals: "\tlog default {\n\t\toutput discard\n\t}",
			sites: "http://mcp.example.com {\n" + indent(filterSnippet(allCredentialHeaders)) +
				"\n\t" + mcpi + "\n\trespond ok\n}",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := caddyfileWarnings(t, tt.globals, tt.sites)
			checkWarnings(t, got, tt.want)
		})
	}
}

func checkWarnings(t *testing.T, got []accessLogWarning, want []string) {
	t.Helper()
	if want == nil {
		if len(got) > 0 {
			t.Fatalf("warned: %+v", got)
		}
		return
	}
	if len(got) != 1 {
		t.Fatalf("%d warnings, want 1: %+v", len(got), got)
	}
	w := got[0]
	if !slices.Equal(w.Headers, want) {
		t.Errorf("headers %q, want %q", w.Headers, want)
	}
	for _, hd := range want {
		line := "request>headers>" + hd + " replace REDACTED"
		if !strings.Contains(w.Caddyfile, line) {
			t.Errorf("caddyfile snippet lacks %q:\n%s", line, w.Caddyfile)
		}
		if !strings.Contains(string(w.JSON), `"request>headers>`+hd+`":{"filter":"replace","value":"REDACTED"}`) {
			t.Errorf("json snippet lacks %s: %s", hd, w.JSON)
		}
	}
	if !strings.Contains(w.Note, "per-request presentation") || len(w.Logs) == 0 {
		t.Errorf("note %q, logs %q", w.Note, w.Logs)
	}
}

// TestAccessLogWarningFrontDoor: with the front door on, the warning also
// says that the consent redirect's code reaches the log, and why it is of
// little value there.
func TestAccessLogWarningFrontDoor(t *testing.T) {
	got := caddyfileWarnings(t, "", "http://mcp.example.com {\n\tlog\n\tmcpi {\n\t\tauthorization_server\n\t\ttrust authorization_server\n\t}\n\trespond ok\n}")
	if len(got) != 1 || !strings.Contains(got[0].Note, "authorization code") || !strings.Contains(got[0].Note, "resp_headers>Location") {
		t.Fatalf("warnings %+v", got)
	}
}

// TestAccessLogWarningPickupToken: with kya_http on, the pickup token's
// header is among those the warning names and its filter removes, and
// the note says what a logged one is worth.
func TestAccessLogWarningPickupToken(t *testing.T) {
	got := caddyfileWarnings(t, "", "http://mcp.example.com {\n\tlog\n\tmcpi {\n\t\tlevel 2\n\t\tauthorization_server {\n\t\t\tkya_http 5m\n\t\t}\n\t\ttrust authorization_server\n\t}\n\trespond ok\n}")
	if len(got) != 1 {
		t.Fatalf("warnings %+v", got)
	}
	w := got[0]
	if !slices.Contains(w.Headers, "X-Kya-Pickup-Token") || !strings.Contains(w.Caddyfile, "request>headers>X-Kya-Pickup-Token replace REDACTED") ||
		!strings.Contains(string(w.JSON), `"request>headers>X-Kya-Pickup-Token"`) || !strings.Contains(w.Note, "pickup token") {
		t.Errorf("warning without the pickup token: %+v", w)
	}
	// The warning's own filter silences it.
	filtered := "http://mcp.example.com {\n\tlog {\n\t\tformat filter {\n"
	for _, hd := range w.Headers {
		filtered += "\t\t\trequest>headers>" + hd + " replace REDACTED\n"
	}
	filtered += "\t\t}\n\t}\n\tmcpi {\n\t\tlevel 2\n\t\tauthorization_server {\n\t\t\tkya_http 5m\n\t\t}\n\t\ttrust authorization_server\n\t}\n\trespond ok\n}"
	if got := caddyfileWarnings(t, "", filtered); len(got) != 0 {
		t.Errorf("the suggested filter does not silence the warning: %+v", got)
	}
	// Without kya_http there is no pickup token to log.
	got = caddyfileWarnings(t, "", "http://mcp.example.com {\n\tlog\n\tmcpi {\n\t\tauthorization_server\n\t\ttrust authorization_server\n\t}\n\trespond ok\n}")
	if len(got) != 1 || slices.Contains(got[0].Headers, "X-Kya-Pickup-Token") {
		t.Errorf("without kya_http: %+v", got)
	}
}

// indent indents a Caddyfile block by one tab.
func indent(s string) string {
	return "\t" + strings.ReplaceAll(s, "\n", "\n\t")
}

// TestAccessLogWarningJSON provisions JSON configs: the warning reads the
// server's logs and the logging config, not the Caddyfile.
func TestAccessLogWarningJSON(t *testing.T) {
	config := func(dir, encoder string) []byte {
		logs := map[string]any{
			"mcpi": map[string]any{
				"writer":  map[string]any{"output": "file", "filename": filepath.Join(dir, "mcpi.log")},
				"encoder": map[string]any{"format": "json"},
				"include": []string{"http.handlers.mcpi"},
			},
			"access": map[string]any{
				"writer":  map[string]any{"output": "discard"},
				"include": []string{"http.log.access"},
			},
			"default": map[string]any{"exclude": []string{"http.log.access", "http.handlers.mcpi"}},
		}
		if encoder != "" {
			// A file, since Caddy drops logs that discard.
			logs["access"].(map[string]any)["writer"] = map[string]any{"output": "file", "filename": filepath.Join(dir, "access.log")}
			logs["access"].(map[string]any)["encoder"] = json.RawMessage(encoder)
		}
		b, err := json.Marshal(map[string]any{
			"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
			"storage": map[string]any{"module": "file_system", "root": filepath.Join(dir, "storage")},
			"logging": map[string]any{"logs": logs},
			"apps": map[string]any{"http": map[string]any{"servers": map[string]any{"srv0": map[string]any{
				"listen":          []string{":8080"},
				"automatic_https": map[string]any{"disable": true},
				"logs":            map[string]any{},
				"routes": []any{map[string]any{"handle": []any{
					map[string]any{"handler": "mcpi", "trusted_issuers": []string{"*"}, "carriers": []string{"kya_delegation", "mcp_i_credential"}},
				}}},
			}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tt := range []struct {
		name, encoder string
		want          []string
	}{
		{name: "access log that discards"},
		{name: "json encoder", encoder: `{"format":"json"}`, want: []string{"Kya-Delegation", "Mcp-I-Credential"}},
		{name: "the warning's filter", encoder: filterJSON([]string{"Kya-Delegation", "Mcp-I-Credential"})},
		{name: "filter of the whole request", encoder: `{"format":"filter","fields":{"request":{"filter":"delete"}}}`},
		{name: "filter of another field", encoder: `{"format":"filter","fields":{"request>headers>Kya-Delegation":{"filter":"delete"},"request>headers>Mcp-I-Credential":{"filter":"rename","name":"x"}}}`,
			want: []string{"Mcp-I-Credential"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			got := provisionForWarnings(t, config(dir, tt.encoder), filepath.Join(dir, "mcpi.log"))
			checkWarnings(t, got, tt.want)
			if len(got) == 1 && !slices.Equal(got[0].Logs, []string{"access"}) {
				t.Errorf("logs %q, want [access]", got[0].Logs)
			}
		})
	}
}

// TestCarrierLogHeadersAreCarriers keeps the warning's carriers in step
// with the edge's.
func TestCarrierLogHeadersAreCarriers(t *testing.T) {
	for _, c := range carrierLogHeaders {
		if !edge.IsCarrier(c.carrier) {
			t.Errorf("%s is not a carrier", c.carrier)
		}
	}
}
