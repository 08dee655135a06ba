package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// More per-tool policy tests (issue 6): JSON-RPC batches with a denied
// call, phishing and malformed handshake actions in enforce and observe
// mode, and max_body_size on a policy route.

// pmHostName is the host the tests reach the edge on, so that authUrls on
// mcpserver.ActionDomain are "the tool endpoint's own registrable domain".
// Connections still go to 127.0.0.1.
const pmHostName = "mcp." + mcpserver.ActionDomain

// pmBatchProtocol is the newest MCP version with JSON-RPC batches: the SDK
// server refuses batches from 2025-06-18 on, so with it a forwarded batch
// would really run its calls.
const pmBatchProtocol = "2025-03-26"

// pmBodyLimit is the max_body_size of the /small/* route, written 4KiB in
// the Caddyfile.
const pmBodyLimit = 4096

// pmConsentURL is the consent_url of the enforce route.
const pmConsentURL = "https://consent.example.test/approve"

// pmHarness is Caddy in front of the policy upstream, reached as
// pmHostName:<port>.
type pmHarness struct {
	*harness
	host string // pmHostName:<port>, the Host of every request
	addr string // 127.0.0.1:<port>, where connections go
}

// newPolicyMoreHarness starts the demo MCP server with the policy tools of
// AddPolicyTools and AddPolicyMoreTools (SSE at mcpserver.Path, JSON at
// policyJSONPath; the Host check of the SDK is off since requests arrive
// with Host pmHostName) and Caddy in front of it with three routes:
//
//	/observe/*  handshake_actions observe, no tool rules
//	/small/*    max_body_size 4KiB and a tool policy
//	else        a default-deny tool policy with consent_url,
//	            handshake_actions enforce
func newPolicyMoreHarness(t *testing.T) *pmHarness {
	t.Helper()
	s := mcpserver.New(mcpserver.Options{CountInterval: countInterval})
	mcpserver.AddPolicyTools(s)
	mcpserver.AddPolicyMoreTools(s)
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true}))
	mux.Handle(policyJSONPath, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{JSONResponse: true, DisableLocalhostProtection: true}))
	rec := &recorder{next: mux}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	caddyfile := testCaddyfile(freePort(t), filepath.Join(dir, "storage"), fmt.Sprintf(`:%[1]d {
	bind 127.0.0.1
	handle_path /observe/* {
		mcpi {
			trust any
			handshake_actions observe
		}
		reverse_proxy %[2]s
	}
	handle_path /small/* {
		mcpi {
			trust any
			max_body_size 4KiB
			tool greet {
				scopes greet:execute
			}
			tool_default allow
		}
		reverse_proxy %[2]s
	}
	handle {
		mcpi {
			trust any
			tool greet {
				scopes greet:execute
			}
			tool files_* {
				scopes files:read
			}
			tool files_write {
				scopes files:write
			}
			tool phish_*
			tool link_*
			tool action_*
			tool_default deny
			consent_url %[3]s
			handshake_actions enforce
		}
		reverse_proxy %[2]s
	}
}
`, h.port, up.Listener.Addr().String(), pmConsentURL))
	h.start(dir, caddyfile)
	return &pmHarness{harness: h, host: pmHostName + ":" + strconv.Itoa(h.port), addr: "127.0.0.1:" + strconv.Itoa(h.port)}
}

// world is newWorld with the audience the edge derives from pmHostName.
func (m *pmHarness) world(t *testing.T) *world {
	w := newWorld(t, m.harness)
	w.audience = "did:web:" + pmHostName + "%3A" + strconv.Itoa(m.port)
	return w
}

// connect opens an SDK client session at path, over connections to
// 127.0.0.1 carrying Host pmHostName:<port>; it is closed when the test ends.
func (m *pmHarness) connect(ctx context.Context, t *testing.T, path string, hdr http.Header, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := m.connectWith(ctx, path, hdr, version, opts, func(tr *mcp.StreamableClientTransport) {
		tr.Endpoint = "http://" + m.host + path
		base := &http.Transport{
			ResponseHeaderTimeout: 10 * time.Second,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, m.addr)
			},
		}
		t.Cleanup(base.CloseIdleConnections)
		tr.HTTPClient = &http.Client{Transport: headerRT{base: base, h: hdr}}
	})
	if err != nil {
		t.Fatalf("connect through the edge at %s: %v", path, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// raw sends one POST with Host pmHostName:<port>. version is sent as
// Mcp-Protocol-Version with the session id, when session is set. A body
// that is not a *bytes.Reader goes out chunked, without Content-Length.
func (m *pmHarness) raw(ctx context.Context, path string, hdr http.Header, session, version, contentType string, body io.Reader) rpcResponse {
	m.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.base+path, body)
	if err != nil {
		m.t.Fatal(err)
	}
	req.Host = m.host
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	return m.do(req)
}

// rawJSON is raw with msg marshalled as application/json.
func (m *pmHarness) rawJSON(ctx context.Context, path string, hdr http.Header, session, version string, msg any) rpcResponse {
	m.t.Helper()
	body, err := json.Marshal(msg)
	if err != nil {
		m.t.Fatal(err)
	}
	return m.raw(ctx, path, hdr, session, version, "application/json", bytes.NewReader(body))
}

// initSession runs the raw initialize handshake at path with version and
// returns the session id.
func (m *pmHarness) initSession(ctx context.Context, t *testing.T, path string, hdr http.Header, version string) string {
	t.Helper()
	resp := m.rawJSON(ctx, path, hdr, "", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "raw", "version": "0"},
	}})
	if resp.Status != http.StatusOK {
		t.Fatalf("initialize: HTTP %d %s", resp.Status, resp.Body)
	}
	if v := resp.result(t, 1)["protocolVersion"]; v != version {
		t.Fatalf("initialize: protocolVersion %v, want %s", v, version)
	}
	session := resp.Header.Get("Mcp-Session-Id")
	if session == "" {
		t.Fatal("initialize: no Mcp-Session-Id")
	}
	notif := map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}
	if resp := m.rawJSON(ctx, path, hdr, session, version, notif); resp.Status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d %s", resp.Status, resp.Body)
	}
	return session
}

// toolCall is a tools/call request message.
func toolCall(id int, name string, args map[string]any) map[string]any {
	params := map[string]any{"name": name}
	if args != nil {
		params["arguments"] = args
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}
}

// upstreamToolCalls returns the tools/call names the upstream received, in
// single messages and in batches.
func upstreamToolCalls(reqs []record) []string {
	var out []string
	for _, r := range reqs {
		if r.Method != http.MethodPost {
			continue
		}
		var msgs []rpcRequest
		if b := bytes.TrimSpace(r.Body); len(b) > 0 && b[0] == '[' {
			_ = json.Unmarshal(b, &msgs)
		} else {
			var one rpcRequest
			if json.Unmarshal(b, &one) == nil {
				msgs = append(msgs, one)
			}
		}
		for _, m := range msgs {
			if m.Method == "tools/call" {
				out = append(out, m.Params.Name)
			}
		}
	}
	return out
}

// message returns the JSON-RPC message with id, failing the test without.
func message(t *testing.T, resp rpcResponse, id int) map[string]any {
	t.Helper()
	for _, m := range resp.Msgs {
		if n, ok := m["id"].(float64); ok && int(n) == id {
			return m
		}
	}
	t.Fatalf("no JSON-RPC message with id %d (HTTP %d): %s", id, resp.Status, resp.Body)
	return nil
}

// rawAction returns result.structuredContent._meta.handshakeAction of a raw
// JSON-RPC result, or nil.
func rawAction(result map[string]any) any {
	sc, _ := result["structuredContent"].(map[string]any)
	meta, _ := sc["_meta"].(map[string]any)
	return meta["handshakeAction"]
}

// sameJSON compares two values by their JSON encoding (map keys sorted,
// numbers as JSON numbers), so a value compares equal to its decoded copy.
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

// rejectedIssues checks that res is the edge's handshake_action_rejected
// tool error and returns its issues as "code field".
func rejectedIssues(t *testing.T, res *mcp.CallToolResult) []string {
	t.Helper()
	sc, _ := res.StructuredContent.(map[string]any)
	if !res.IsError || sc["error"] != "handshake_action_rejected" {
		t.Fatalf("isError=%t structuredContent %v, want the handshake_action_rejected tool error", res.IsError, res.StructuredContent)
	}
	if handshakeAction(res) != nil || sc["_meta"] != nil {
		t.Errorf("the rejected result still carries _meta: %v", sc)
	}
	if len(res.Content) != 1 {
		t.Fatalf("content %v, want one text", res.Content)
	}
	if text, _ := res.Content[0].(*mcp.TextContent); text == nil || !strings.Contains(text.Text, "handshake action failed validation") {
		t.Errorf("content %#v, want the edge's explanation", res.Content[0])
	}
	var out []string
	list, _ := sc["issues"].([]any)
	for _, is := range list {
		m, _ := is.(map[string]any)
		out = append(out, fmt.Sprintf("%v %v", m["code"], m["field"]))
	}
	return out
}

// TestPolicyMoreBatch: a JSON-RPC batch holding an allowed and a denied
// tools/call is answered by the edge as caddymodule/policy.go documents:
// the denied calls get their tool error results (auth_required with a
// consent link for a missing scope, tool_not_allowed for default deny),
// every other request a JSON-RPC error asking to send it alone, the
// notification no answer; nothing of the batch reaches the upstream. A batch
// of allowed calls only is forwarded (the session speaks 2025-03-26, whose
// batches the SDK server runs), and the refused call succeeds on its own.
func TestPolicyMoreBatch(t *testing.T) {
	m := newPolicyMoreHarness(t)
	w := m.world(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}

	for _, path := range []string{mcpserver.Path, policyJSONPath} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			ctx := testContext(t)
			session := m.initSession(ctx, t, path, auth, pmBatchProtocol)

			// Control: every call allowed, the batch goes upstream.
			m.upstream.Reset()
			resp := m.rawJSON(ctx, path, auth, session, pmBatchProtocol, []any{
				toolCall(21, "greet", map[string]any{"name": "Ada"}),
				toolCall(22, "files_read", nil),
			})
			if resp.Status != http.StatusOK {
				t.Fatalf("allowed batch: HTTP %d %s", resp.Status, resp.Body)
			}
			for _, id := range []int{21, 22} {
				if res := resp.result(t, id); res["isError"] == true {
					t.Errorf("allowed batch, id %d: %v", id, res)
				}
			}
			if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, []string{"greet", "files_read"}) {
				t.Errorf("allowed batch: upstream ran %v, want [greet files_read]", got)
			}

			// One allowed call, two denied ones, a ping and a notification.
			m.upstream.Reset()
			resp = m.rawJSON(ctx, path, auth, session, pmBatchProtocol, []any{
				toolCall(11, "greet", map[string]any{"name": "Ada"}),
				toolCall(12, "files_write", map[string]any{"path": "/x"}),
				toolCall(13, "admin_reset", nil),
				map[string]any{"jsonrpc": "2.0", "id": 14, "method": "ping"},
				map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 99}},
			})
			if resp.Status != http.StatusOK {
				t.Fatalf("mixed batch: HTTP %d %s", resp.Status, resp.Body)
			}
			if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" {
				t.Errorf("mixed batch: Content-Type %q, want application/json", resp.Header.Get("Content-Type"))
			}
			if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
				t.Errorf("mixed batch: Cache-Control %q, want no-store", cc)
			}
			var arr []map[string]any
			if err := json.Unmarshal(resp.Body, &arr); err != nil {
				t.Fatalf("mixed batch: body is not a JSON array: %v: %s", err, resp.Body)
			}
			var ids []float64
			for _, msg := range arr {
				id, _ := msg["id"].(float64)
				ids = append(ids, id)
				if msg["jsonrpc"] != "2.0" {
					t.Errorf("mixed batch: answer %v without jsonrpc 2.0", msg)
				}
			}
			if !slices.Equal(ids, []float64{11, 12, 13, 14}) {
				t.Fatalf("mixed batch: answer ids %v, want [11 12 13 14] (no answer to the notification): %s", ids, resp.Body)
			}
			for _, id := range []int{11, 14} {
				msg := message(t, resp, id)
				e, _ := msg["error"].(map[string]any)
				if e == nil || e["code"] != float64(-32000) || msg["result"] != nil {
					t.Errorf("mixed batch, id %d: %v, want JSON-RPC error -32000", id, msg)
					continue
				}
				if text, _ := e["message"].(string); !strings.Contains(text, "send this request on its own") {
					t.Errorf("mixed batch, id %d: error message %q, want the advice to send it alone", id, text)
				}
			}

			// Missing scope: auth_required with the consent link.
			res := resp.result(t, 12)
			if res["isError"] != true {
				t.Errorf("files_write: isError %v, want true", res["isError"])
			}
			a, _ := rawAction(res).(map[string]any)
			if a["_action"] != "auth_required" || a["provider"] != "mcp-i" {
				t.Fatalf("files_write: handshakeAction %v, want auth_required by mcp-i", a)
			}
			u, err := url.Parse(fmt.Sprint(a["authUrl"]))
			if err != nil || u.Scheme+"://"+u.Host+u.Path != pmConsentURL {
				t.Fatalf("files_write: authUrl %v, want %s?…", a["authUrl"], pmConsentURL)
			}
			q := u.Query()
			if q.Get("tool") != "files_write" || q.Get("scopes") != "files:write" || q.Get("agent_did") != w.agent.did || q.Get("resume_token") == "" {
				t.Errorf("files_write: authUrl query %v", q)
			}

			// No rule, default deny: a plain tool error.
			res = resp.result(t, 13)
			sc, _ := res["structuredContent"].(map[string]any)
			if res["isError"] != true || sc["error"] != "tool_not_allowed" || sc["toolName"] != "admin_reset" {
				t.Errorf("admin_reset: %v, want the tool_not_allowed tool error", res)
			}

			if reqs := m.upstream.Requests(); len(reqs) != 0 {
				t.Errorf("mixed batch: the upstream received %d request(s), tools/call %v; want none", len(reqs), upstreamToolCalls(reqs))
			}

			// A batch of one denied call is still answered with an array.
			resp = m.rawJSON(ctx, path, auth, session, pmBatchProtocol, []any{toolCall(15, "files_write", nil)})
			if resp.Status != http.StatusOK || !bytes.HasPrefix(bytes.TrimSpace(resp.Body), []byte("[")) {
				t.Fatalf("one-call batch: HTTP %d %s, want 200 with a JSON array", resp.Status, resp.Body)
			}
			if res := resp.result(t, 15); res["isError"] != true {
				t.Errorf("one-call batch: %v, want isError", res)
			}
			if reqs := m.upstream.Requests(); len(reqs) != 0 {
				t.Errorf("one-call batch: the upstream received %d request(s)", len(reqs))
			}

			// As advised, the refused request succeeds on its own.
			resp = m.rawJSON(ctx, path, auth, session, pmBatchProtocol, toolCall(16, "greet", map[string]any{"name": "Ada"}))
			if resp.Status != http.StatusOK {
				t.Fatalf("greet alone: HTTP %d %s", resp.Status, resp.Body)
			}
			res = resp.result(t, 16)
			content, _ := res["content"].([]any)
			if res["isError"] == true || len(content) != 1 || content[0].(map[string]any)["text"] != "Hello, Ada" {
				t.Errorf("greet alone: %v", res)
			}
			if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, []string{"greet"}) {
				t.Errorf("greet alone: upstream ran %v, want [greet]", got)
			}
		})
	}
}

// routeCase is one route of the handshake-action tests.
type routeCase struct {
	name, prefix string
	enforce      bool
}

var actionRoutes = []routeCase{{"enforce", "", true}, {"observe", "/observe", false}}

// TestPolicyMorePhishingAuthURL: a tool result whose auth_required authUrl
// points to a look-alike host of another domain, or to the right domain over
// plain http, is replaced by a tool error in enforce mode (the URL never
// reaches the client) and passes unchanged in observe mode. An https authUrl
// on the endpoint's own registrable domain passes both, tagged with
// context_did. The upstream runs every call either way: the check is on the
// way back.
func TestPolicyMorePhishingAuthURL(t *testing.T) {
	m := newPolicyMoreHarness(t)
	w := m.world(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	phish := []struct {
		tool, url, issue string
	}{
		{"phish_lookalike", mcpserver.PhishLookalikeURL, "foreign_host authUrl"},
		{"phish_http", mcpserver.PhishHTTPURL, "insecure_url authUrl"},
	}
	valid := mcpserver.SameDomainAuthURL + "&context_did=" + url.QueryEscape(w.user.did)

	for _, rc := range actionRoutes {
		for _, path := range []string{mcpserver.Path, policyJSONPath} {
			t.Run(rc.name+"/"+strings.TrimPrefix(path, "/"), func(t *testing.T) {
				ctx := testContext(t)
				cs := m.connect(ctx, t, rc.prefix+path, auth, legacyProtocol, nil)
				m.upstream.Reset()

				for _, p := range phish {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: p.tool})
					if err != nil {
						t.Fatalf("%s: %v", p.tool, err)
					}
					if !rc.enforce {
						if res.IsError {
							t.Errorf("%s: isError in observe mode: %+v", p.tool, res)
						}
						want := map[string]any{"_action": "auth_required", "provider": "example", "authUrl": p.url}
						if a := handshakeAction(res); !sameJSON(t, a, want) {
							t.Errorf("%s: handshakeAction %v, want it unchanged: %v", p.tool, a, want)
						}
						if text, _ := res.Content[0].(*mcp.TextContent); text == nil || text.Text != mcpserver.LinkText {
							t.Errorf("%s: content %#v, want the tool's own", p.tool, res.Content[0])
						}
						continue
					}
					if got := rejectedIssues(t, res); !slices.Equal(got, []string{p.issue}) {
						t.Errorf("%s: issues %v, want [%s]", p.tool, got, p.issue)
					}
					// Neither the URL nor its query (state) may reach the
					// model, in any field.
					out, _ := json.Marshal(res)
					base, _, _ := strings.Cut(p.url, "?")
					if bytes.Contains(out, []byte(base)) || bytes.Contains(out, []byte("state=p")) {
						t.Errorf("%s: the authUrl reached the client: %s", p.tool, out)
					}
				}

				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "link_same_domain"})
				if err != nil || res.IsError {
					t.Fatalf("link_same_domain: %v %+v", err, res)
				}
				if got := handshakeAction(res)["authUrl"]; got != valid {
					t.Errorf("link_same_domain: authUrl %v, want %s", got, valid)
				}

				want := []string{"phish_lookalike", "phish_http", "link_same_domain"}
				if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, want) {
					t.Errorf("upstream ran %v, want %v", got, want)
				}
			})
		}
	}

	// The same on the wire: HTTP 200 with the rewritten JSON-RPC result.
	for _, rc := range actionRoutes {
		t.Run("raw/"+rc.name, func(t *testing.T) {
			ctx := testContext(t)
			path := rc.prefix + policyJSONPath
			session := m.initSession(ctx, t, path, auth, legacyProtocol)
			m.upstream.Reset()
			resp := m.rawJSON(ctx, path, auth, session, legacyProtocol, toolCall(7, "phish_http", nil))
			if resp.Status != http.StatusOK {
				t.Fatalf("HTTP %d %s", resp.Status, resp.Body)
			}
			if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" {
				t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
			}
			if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(resp.Body)) {
				t.Errorf("Content-Length %q for a %d-byte body", cl, len(resp.Body))
			}
			res := resp.result(t, 7)
			sc, _ := res["structuredContent"].(map[string]any)
			if rc.enforce {
				if res["isError"] != true || sc["error"] != "handshake_action_rejected" || rawAction(res) != nil {
					t.Errorf("enforce: %s, want the handshake_action_rejected tool error", resp.Body)
				}
			} else {
				a, _ := rawAction(res).(map[string]any)
				if res["isError"] == true || a["authUrl"] != mcpserver.PhishHTTPURL {
					t.Errorf("observe: %s, want the result unchanged", resp.Body)
				}
			}
			if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, []string{"phish_http"}) {
				t.Errorf("upstream ran %v, want [phish_http]", got)
			}
		})
	}
}

// TestPolicyMorePhishingAuthURLBatch: the phishing checks apply to every
// result of a forwarded batch (2025-03-26 session), in SSE events and in a
// JSON array: in enforce mode the phishing results are replaced and the
// valid one kept, in observe mode all pass.
func TestPolicyMorePhishingAuthURLBatch(t *testing.T) {
	m := newPolicyMoreHarness(t)
	w := m.world(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	valid := mcpserver.SameDomainAuthURL + "&context_did=" + url.QueryEscape(w.user.did)
	for _, rc := range actionRoutes {
		for _, path := range []string{mcpserver.Path, policyJSONPath} {
			t.Run(rc.name+"/"+strings.TrimPrefix(path, "/"), func(t *testing.T) {
				ctx := testContext(t)
				path := rc.prefix + path
				session := m.initSession(ctx, t, path, auth, pmBatchProtocol)
				m.upstream.Reset()
				resp := m.rawJSON(ctx, path, auth, session, pmBatchProtocol, []any{
					toolCall(31, "phish_lookalike", nil),
					toolCall(32, "link_same_domain", nil),
					toolCall(33, "phish_http", nil),
				})
				if resp.Status != http.StatusOK {
					t.Fatalf("HTTP %d %s", resp.Status, resp.Body)
				}
				for id, u := range map[int]string{31: mcpserver.PhishLookalikeURL, 33: mcpserver.PhishHTTPURL} {
					res := resp.result(t, id)
					a, _ := rawAction(res).(map[string]any)
					sc, _ := res["structuredContent"].(map[string]any)
					if rc.enforce && (res["isError"] != true || sc["error"] != "handshake_action_rejected" || a != nil) {
						t.Errorf("id %d: %v, want the handshake_action_rejected tool error", id, res)
					}
					if !rc.enforce && (res["isError"] == true || a["authUrl"] != u) {
						t.Errorf("id %d: %v, want it unchanged", id, res)
					}
				}
				if rc.enforce {
					for _, u := range []string{mcpserver.PhishLookalikeURL, mcpserver.PhishHTTPURL} {
						if base, _, _ := strings.Cut(u, "?"); bytes.Contains(resp.Body, []byte(base)) {
							t.Errorf("%s reached the client: %s", base, resp.Body)
						}
					}
				}
				res := resp.result(t, 32)
				if a, _ := rawAction(res).(map[string]any); res["isError"] == true || a["authUrl"] != valid {
					t.Errorf("id 32: %v, want authUrl %s", res, valid)
				}
				want := []string{"phish_lookalike", "link_same_domain", "phish_http"}
				if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, want) {
					t.Errorf("upstream ran %v, want %v", got, want)
				}
			})
		}
	}
}

// TestPolicyMorePhishingAuthURLStreamed: a phishing result that ends an SSE
// stream of progress notifications is replaced in enforce mode and passed in
// observe mode, and the notifications before it still arrive, in order.
func TestPolicyMorePhishingAuthURLStreamed(t *testing.T) {
	m := newPolicyMoreHarness(t)
	w := m.world(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	for _, rc := range actionRoutes {
		t.Run(rc.name, func(t *testing.T) {
			ctx := testContext(t)
			path := rc.prefix + mcpserver.Path
			progressc := make(chan float64, 2*mcpserver.StreamedProgress)
			opts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				progressc <- req.Params.Progress
			}}
			cs := m.connect(ctx, t, path, auth, legacyProtocol, opts)
			m.upstream.Reset()
			params := &mcp.CallToolParams{Name: "phish_streamed"}
			params.SetProgressToken("p1")
			res, err := cs.CallTool(ctx, params)
			if err != nil {
				t.Fatalf("phish_streamed: %v", err)
			}
			if rc.enforce {
				if got := rejectedIssues(t, res); !slices.Equal(got, []string{"foreign_host authUrl"}) {
					t.Errorf("issues %v, want [foreign_host authUrl]", got)
				}
			} else if a := handshakeAction(res); res.IsError || a["authUrl"] != mcpserver.PhishLookalikeURL {
				t.Errorf("isError=%t handshakeAction %v, want it unchanged", res.IsError, a)
			}
			// The SDK client runs notification handlers asynchronously.
			for i := 1; i <= mcpserver.StreamedProgress; i++ {
				select {
				case p := <-progressc:
					if p != float64(i) {
						t.Errorf("progress %v, want %d", p, i)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%d progress notification(s), want %d", i-1, mcpserver.StreamedProgress)
				}
			}
			if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, []string{"phish_streamed"}) {
				t.Errorf("upstream ran %v, want [phish_streamed]", got)
			}

			// On the wire: one SSE stream, the notifications, then the
			// (checked) result.
			session := m.initSession(ctx, t, path, auth, legacyProtocol)
			msg := toolCall(5, "phish_streamed", nil)
			msg["params"].(map[string]any)["_meta"] = map[string]any{"progressToken": "p2"}
			resp := m.rawJSON(ctx, path, auth, session, legacyProtocol, msg)
			if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.Status != http.StatusOK || ct != "text/event-stream" {
				t.Fatalf("HTTP %d Content-Type %q, want 200 text/event-stream", resp.Status, resp.Header.Get("Content-Type"))
			}
			var kinds []string
			for _, msg := range resp.Msgs {
				kind := fmt.Sprint(msg["method"])
				if msg["result"] != nil {
					kind = "result"
				}
				kinds = append(kinds, kind)
			}
			if want := []string{"notifications/progress", "notifications/progress", "result"}; !slices.Equal(kinds, want) {
				t.Fatalf("events %v, want %v: %s", kinds, want, resp.Body)
			}
			result := resp.result(t, 5)
			a, _ := rawAction(result).(map[string]any)
			if rc.enforce && (result["isError"] != true || a != nil) {
				t.Errorf("result %v, want the handshake_action_rejected tool error", result)
			}
			if !rc.enforce && a["authUrl"] != mcpserver.PhishLookalikeURL {
				t.Errorf("result %v, want it unchanged", result)
			}
		})
	}
}

// TestPolicyMoreMalformedAction: handshake actions a client could not act
// on safely (signature_request without types, an unknown _action, a
// transaction_proposal to a short address, a handshakeAction that is not an
// object) are replaced by a tool error naming the issue in enforce mode, and
// pass unchanged in observe mode.
func TestPolicyMoreMalformedAction(t *testing.T) {
	m := newPolicyMoreHarness(t)
	w := m.world(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	cases := []struct {
		tool, issue string
	}{
		{"action_sig_no_types", "malformed types"},
		{"action_unknown", "unknown_action _action"},
		{"action_tx_bad_to", "malformed to"},
		{"action_not_object", "malformed structuredContent._meta.handshakeAction"},
	}

	for _, rc := range actionRoutes {
		for _, path := range []string{mcpserver.Path, policyJSONPath} {
			t.Run(rc.name+"/"+strings.TrimPrefix(path, "/"), func(t *testing.T) {
				ctx := testContext(t)
				cs := m.connect(ctx, t, rc.prefix+path, auth, legacyProtocol, nil)
				m.upstream.Reset()
				var want []string
				for _, c := range cases {
					want = append(want, c.tool)
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool})
					if err != nil {
						t.Fatalf("%s: %v", c.tool, err)
					}
					if rc.enforce {
						if got := rejectedIssues(t, res); !slices.Equal(got, []string{c.issue}) {
							t.Errorf("%s: issues %v, want [%s]", c.tool, got, c.issue)
						}
						continue
					}
					sc, _ := res.StructuredContent.(map[string]any)
					meta, _ := sc["_meta"].(map[string]any)
					if res.IsError || !sameJSON(t, meta["handshakeAction"], mcpserver.MalformedActions[c.tool]) {
						t.Errorf("%s: isError=%t handshakeAction %v, want it unchanged in observe mode", c.tool, res.IsError, meta["handshakeAction"])
					}
				}
				if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, want) {
					t.Errorf("upstream ran %v, want %v", got, want)
				}
			})
		}
	}
}

// pmGreetBody is a tools/call of greet whose JSON encoding is exactly size
// bytes.
func pmGreetBody(t *testing.T, id, size int) []byte {
	t.Helper()
	msg := func(name string) []byte {
		b, err := json.Marshal(toolCall(id, "greet", map[string]any{"name": name}))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	n := size - len(msg(""))
	if n < 0 {
		t.Fatalf("a greet call needs more than %d bytes", size)
	}
	b := msg(strings.Repeat("a", n))
	if len(b) != size {
		t.Fatalf("greet body is %d bytes, want %d", len(b), size)
	}
	return b
}

// TestPolicyMoreBodyLimit: on a route with max_body_size 4KiB and a tool
// policy, a JSON-RPC body of exactly 4KiB goes through, and one byte more is
// refused with 413 and the edge's JSON error body, whether the size is
// declared (Content-Length) or discovered (chunked), and whatever the
// content type; nothing of a refused request reaches the upstream. The SDK
// client sees the refusal as a failed call.
func TestPolicyMoreBodyLimit(t *testing.T) {
	m := newPolicyMoreHarness(t)
	w := m.world(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	path := "/small" + policyJSONPath

	t.Run("raw", func(t *testing.T) {
		ctx := testContext(t)
		session := m.initSession(ctx, t, path, auth, legacyProtocol)

		m.upstream.Reset()
		resp := m.raw(ctx, path, auth, session, legacyProtocol, "application/json", bytes.NewReader(pmGreetBody(t, 2, pmBodyLimit)))
		if resp.Status != http.StatusOK {
			t.Fatalf("%d bytes: HTTP %d %s", pmBodyLimit, resp.Status, resp.Body)
		}
		if res := resp.result(t, 2); res["isError"] == true {
			t.Errorf("%d bytes: %v", pmBodyLimit, res)
		}
		if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, []string{"greet"}) {
			t.Errorf("%d bytes: upstream ran %v, want [greet]", pmBodyLimit, got)
		}

		over := pmGreetBody(t, 3, pmBodyLimit+1)
		for _, c := range []struct {
			name, contentType string
			body              func() io.Reader
		}{
			{"content-length", "application/json", func() io.Reader { return bytes.NewReader(over) }},
			// Not a *bytes.Reader: net/http sends it chunked.
			{"chunked", "application/json", func() io.Reader { return io.MultiReader(bytes.NewReader(over)) }},
		} {
			t.Run(c.name, func(t *testing.T) {
				m.upstream.Reset()
				resp := m.raw(ctx, path, auth, session, legacyProtocol, c.contentType, c.body())
				body := m.assertEdgeError(t, resp, http.StatusRequestEntityTooLarge, "invalid_request")
				if !strings.HasPrefix(body.Description, "request body too large") || !strings.Contains(body.Description, "max_body_size") {
					t.Errorf("error_description %q", body.Description)
				}
				if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
					t.Errorf("Cache-Control %q, want no-store", cc)
				}
				if reqs := m.upstream.Requests(); len(reqs) != 0 {
					t.Errorf("the upstream received %d request(s) (tools/call %v), want none", len(reqs), upstreamToolCalls(reqs))
				}
			})
		}
	})

	t.Run("sdk", func(t *testing.T) {
		ctx := testContext(t)
		cs := m.connect(ctx, t, "/small"+mcpserver.Path, auth, legacyProtocol, nil)
		m.upstream.Reset()
		greet(ctx, t, cs)
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": strings.Repeat("a", 2*pmBodyLimit)}})
		if err == nil {
			t.Fatal("a tools/call over max_body_size succeeded")
		}
		if !strings.Contains(err.Error(), http.StatusText(http.StatusRequestEntityTooLarge)) {
			t.Errorf("error %q, want the 413 to show", err)
		}
		if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, []string{"greet"}) {
			t.Errorf("upstream ran %v, want only the first greet", got)
		}
	})
}
