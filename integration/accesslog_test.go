package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// auditLogger is the logger of the edge's audit entries, as operators name
// it in `include`.
const auditLogger = "http.handlers.mcpi.audit"

// carrierLogFilter is the filter that keeps the non-Authorization header
// carriers out of an access log (docs/security.md): Caddy redacts only
// Authorization, Cookie, Set-Cookie and Proxy-Authorization by itself.
const carrierLogFilter = `format filter {
			wrap json
			request>headers>Kya-Delegation replace REDACTED
			request>headers>Kya-Os-Delegation-Credential replace REDACTED
			request>headers>Mcp-I-Credential replace REDACTED
			request>headers>Mcp-I-Delegation replace REDACTED
		}`

// alogCase is one request sent to each site: a credential in one carrier.
type alogCase struct {
	name    string
	header  http.Header
	body    map[string]any // initialize params extras
	carrier string         // as the audit log names it
	// secret is the credential sent; headerCarrier names the header that
	// held it (empty for Authorization and the body, which no access log
	// shows).
	secret        string
	headerCarrier string
	admitted      bool
}

// TestAccessLogCredentials sends a credential in every carrier to two sites,
// one with a plain JSON access log and one with the recommended filter, and
// reads both logs and the audit log (routed to its own file by
// `include http.handlers.mcpi.audit`).
//
// Caddy logs the request headers as they arrived: it clones the request for
// the access log before any handler runs (caddyhttp/server.go, ServeHTTP),
// so the handler removing the carriers (step 6 of ServeHTTP) protects the
// upstream but not the access log. Caddy itself redacts Authorization; the
// other header carriers need the filter. The plain site pins that
// behaviour of Caddy: if it starts failing, Caddy changed and
// docs/security.md must follow.
func TestAccessLogCredentials(t *testing.T) {
	rec := &recorder{next: mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})}
	up := httptest.NewServer(rec)
	t.Cleanup(func() {
		up.CloseClientConnections()
		up.Close()
	})
	dir := t.TempDir()
	plainPort, filteredPort, adminPort := freePort(t), freePort(t), freePort(t)
	plainLog := filepath.Join(dir, "access-plain.log")
	filteredLog := filepath.Join(dir, "access-filtered.log")
	auditLog := filepath.Join(dir, "audit.log")

	site := func(port int, logFile, format string) string {
		return fmt.Sprintf(`:%d {
	bind 127.0.0.1
	log {
		output file %s
		%s
	}
	# Makes the request's uuid before the edge runs (header is ordered
	# before mcpi): the access log has it, and the audit entry reuses it.
	header X-Request-Id {http.request.uuid}
	mcpi {
		trust any
	}
	reverse_proxy %s
}
`, port, logFile, format, up.Listener.Addr())
	}
	caddyfile := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	auto_https off
	persist_config off
	skip_install_trust
	grace_period 1ns
	storage file_system {
		root %s
	}
	log mcpi_audit {
		include %s
		output file %s
		format json
	}
}

%s
%s`, adminPort, filepath.Join(dir, "storage"), auditLogger, auditLog,
		site(plainPort, plainLog, "format json"), site(filteredPort, filteredLog, carrierLogFilter))

	out := &syncBuffer{}
	plainBase := "http://127.0.0.1:" + strconv.Itoa(plainPort)
	startCaddy(t, dir, caddyfile, plainBase+"/.well-known/oauth-protected-resource", out)

	// One credential good at both sites (the audience is derived from the
	// Host, so it must name both ports).
	plain := &harness{t: t, port: plainPort, base: plainBase, upstream: rec, output: out}
	filtered := &harness{t: t, port: filteredPort, base: "http://127.0.0.1:" + strconv.Itoa(filteredPort), upstream: rec, output: out}
	w := newWorld(t, plain)
	tok := w.jwt(t, func(tm *vc.Template) { tm.Audience = []string{plain.hostAudience(), filtered.hostAudience()} })
	forged := tamper(tok)
	secrets := []string{tok, forged}

	cases := []alogCase{
		{name: "authorization", header: http.Header{"Authorization": {"Bearer " + tok}}, carrier: "authorization", secret: tok, admitted: true},
		{name: "kya-delegation", header: http.Header{"KYA-Delegation": {tok}}, carrier: "kya_delegation", secret: tok, headerCarrier: "Kya-Delegation", admitted: true},
		{name: "kya-os-delegation-credential", header: http.Header{"KYA-OS-Delegation-Credential": {tok}}, carrier: "kya_os_delegation_credential", secret: tok, headerCarrier: "Kya-Os-Delegation-Credential", admitted: true},
		{name: "mcp-i-credential", header: http.Header{"MCP-I-Credential": {tok}, "MCP-I-Delegation": {"urn:uuid:demo"}}, carrier: "mcp_i_credential", secret: tok, headerCarrier: "Mcp-I-Credential", admitted: true},
		{name: "delegation-token", body: map[string]any{"delegationToken": tok}, carrier: "delegation_token", secret: tok, admitted: true},
		{name: "forged", header: http.Header{"KYA-Delegation": {forged}}, carrier: "kya_delegation", secret: forged, headerCarrier: "Kya-Delegation"},
	}
	ctx := testContext(t)
	for _, h := range []*harness{plain, filtered} {
		for _, c := range cases {
			hdr := c.header.Clone()
			if hdr == nil {
				hdr = http.Header{}
			}
			hdr.Set("X-Test-Case", c.name)
			params := map[string]any{
				"protocolVersion": legacyProtocol,
				"capabilities":    map[string]any{},
				"clientInfo":      map[string]any{"name": "accesslog", "version": "0"},
			}
			for k, v := range c.body {
				params[k] = v
			}
			resp := h.post(ctx, "/mcp", hdr, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
			want := http.StatusUnauthorized
			if c.admitted {
				want = http.StatusOK
			}
			if resp.Status != want {
				t.Fatalf("%s %s: HTTP %d, want %d: %s", h.base, c.name, resp.Status, want, resp.Body)
			}
		}
	}

	// Caddy writes the access log entry after the response: wait for them.
	plainEntries := alogWaitCases(t, plainLog, len(cases))
	filteredEntries := alogWaitCases(t, filteredLog, len(cases))

	t.Run("plain json log", func(t *testing.T) {
		for _, c := range cases {
			e := plainEntries[c.name]
			hdrs := alogHeaders(t, e)
			switch {
			case c.name == "authorization":
				if got := hdrs["Authorization"]; len(got) != 1 || got[0] != "REDACTED" {
					t.Errorf("Authorization logged as %q, want Caddy's REDACTED", got)
				}
			case c.headerCarrier != "":
				// Caddy logs the carrier as received.
				if !strings.Contains(e.line, c.secret) {
					t.Errorf("%s: the credential is no longer in Caddy's default access log; Caddy changed, update docs/security.md", c.name)
				}
				continue
			}
			for i, s := range secrets {
				if strings.Contains(e.line, s) {
					t.Errorf("%s: access log entry contains secret #%d", c.name, i)
				}
			}
		}
	})

	t.Run("filtered json log", func(t *testing.T) {
		data, err := os.ReadFile(filteredLog)
		if err != nil {
			t.Fatal(err)
		}
		alogAssertNoSecret(t, "filtered access log", string(data), secrets)
		for _, c := range cases {
			e := filteredEntries[c.name]
			if c.headerCarrier == "" {
				continue
			}
			// The filter keeps the header's presence: operators still see
			// which carrier was used.
			if got := alogHeaders(t, e)[c.headerCarrier]; got == nil {
				t.Errorf("%s: header %s missing from the filtered entry, want REDACTED", c.name, c.headerCarrier)
			}
			if !strings.Contains(e.line, `"`+c.headerCarrier+`":"REDACTED"`) {
				t.Errorf("%s: header %s not REDACTED: %s", c.name, c.headerCarrier, e.line)
			}
		}
	})

	t.Run("audit log", func(t *testing.T) {
		entries := alogWaitLines(t, auditLog, 2*len(cases))
		data, err := os.ReadFile(auditLog)
		if err != nil {
			t.Fatal(err)
		}
		alogAssertNoSecret(t, "audit log", string(data), secrets)

		// Each access log entry has the uuid (made before the edge by the
		// header directive) that the audit entry of the same request calls
		// request_id.
		byID := make(map[string]map[string]any, len(entries))
		for _, e := range entries {
			if e.fields["logger"] != auditLogger || e.fields["msg"] != "mcpi decision" || e.fields["level"] != "info" {
				t.Errorf("audit entry logger/msg/level: %s", e.line)
			}
			id, _ := e.fields["request_id"].(string)
			if id == "" {
				t.Errorf("audit entry without request_id: %s", e.line)
			}
			byID[id] = e.fields
		}
		for site, logged := range map[string]map[string]alogEntry{"plain": plainEntries, "filtered": filteredEntries} {
			for _, c := range cases {
				uuid, _ := logged[c.name].fields["uuid"].(string)
				a, ok := byID[uuid]
				if uuid == "" || !ok {
					t.Errorf("%s/%s: no audit entry for access log uuid %q", site, c.name, uuid)
					continue
				}
				if a["carrier"] != c.carrier || a["path"] != "/mcp" || a["method"] != "POST" || a["remote_ip"] != "127.0.0.1" {
					t.Errorf("%s/%s: audit entry %v", site, c.name, a)
				}
				if c.admitted {
					if a["outcome"] != "admitted" || a["reason"] != "ok" || a["agent_did"] != w.agent.did || a["user_did"] != w.user.did || a["issuer"] != w.issuer.did {
						t.Errorf("%s/%s: audit entry %v", site, c.name, a)
					}
				} else if a["outcome"] != "rejected" || a["reason"] != "bad_signature" || a["status"] != float64(401) || a["agent_did"] != nil {
					t.Errorf("%s/%s: audit entry %v", site, c.name, a)
				}
			}
		}
	})

	t.Run("provisioning warnings", func(t *testing.T) {
		// Each mcpi handler checks its site's access log when Caddy loads
		// the config: the plain site keeps every header carrier, the
		// filtered one (whose filter leaves out the chain header) one.
		var got [][]string
		for _, line := range strings.Split(out.String(), "\n") {
			var e struct {
				Logger, Msg, Caddyfile string
				Headers                []string
			}
			if json.Unmarshal([]byte(line), &e) != nil || !strings.HasPrefix(e.Msg, "mcpi: the access log records credential headers in full") {
				continue
			}
			if e.Logger != "http.handlers.mcpi" || !strings.Contains(e.Caddyfile, "request>headers>"+e.Headers[0]+" replace REDACTED") {
				t.Errorf("warning %s", line)
			}
			got = append(got, e.Headers)
		}
		want := []string{"Kya-Delegation", "Kya-Os-Delegation-Credential", "Mcp-I-Credential", "Kya-Os-Delegation-Chain"}
		if len(got) != 2 || !slices.ContainsFunc(got, func(h []string) bool { return slices.Equal(h, want) }) ||
			!slices.ContainsFunc(got, func(h []string) bool { return slices.Equal(h, []string{"Kya-Os-Delegation-Chain"}) }) {
			t.Errorf("warnings name %q, want %q and [Kya-Os-Delegation-Chain]", got, want)
		}
	})

	t.Run("default log", func(t *testing.T) {
		// The audit log went to its own file only (the Caddyfile excludes
		// an included logger from the default log), and nothing Caddy
		// printed holds a credential.
		stderr := out.String()
		if strings.Contains(stderr, auditLogger) {
			t.Errorf("audit entries reached the default log")
		}
		alogAssertNoSecret(t, "Caddy's output", stderr, secrets)
	})
}

// alogEntry is one JSON log line.
type alogEntry struct {
	line   string
	fields map[string]any
}

// alogRead returns the JSON entries of a log file (none if it does not
// exist yet).
func alogRead(t *testing.T, path string) []alogEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []alogEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue // a line being written
		}
		out = append(out, alogEntry{line: sc.Text(), fields: m})
	}
	return out
}

// alogWaitLines waits until the log file holds at least n entries.
func alogWaitLines(t *testing.T, path string, n int) []alogEntry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries := alogRead(t, path)
		if len(entries) >= n {
			return entries
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d entries after 10s, want %d", filepath.Base(path), len(entries), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alogWaitCases waits until the access log holds an entry for each of the
// n test cases (by their X-Test-Case header) and returns them by case.
func alogWaitCases(t *testing.T, path string, n int) map[string]alogEntry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		byCase := make(map[string]alogEntry)
		for _, e := range alogRead(t, path) {
			if v := alogHeaders(t, e)["X-Test-Case"]; len(v) == 1 {
				byCase[v[0]] = e
			}
		}
		if len(byCase) >= n {
			return byCase
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: entries for %d test cases after 10s, want %d", filepath.Base(path), len(byCase), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alogHeaders returns request.headers of an access log entry.
func alogHeaders(t *testing.T, e alogEntry) map[string][]string {
	t.Helper()
	req, _ := e.fields["request"].(map[string]any)
	raw, _ := req["headers"].(map[string]any)
	out := make(map[string][]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case []any:
			for _, s := range v {
				str, _ := s.(string)
				out[k] = append(out[k], str)
			}
		case string: // a filter's replacement
			out[k] = []string{v}
		}
	}
	return out
}

// alogAssertNoSecret fails if text contains a secret or any 12 characters
// in a row of a secret's signature. Only what and where are printed.
func alogAssertNoSecret(t *testing.T, where, text string, secrets []string) {
	t.Helper()
	for i, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s contains secret #%d", where, i)
			continue
		}
		sig := s[strings.LastIndexByte(s, '.')+1:]
		for j := 0; j+12 <= len(sig); j++ {
			if strings.Contains(text, sig[j:j+12]) {
				t.Errorf("%s contains part of the signature of secret #%d", where, i)
				break
			}
		}
	}
}
