package integration

// The harness of the per-tool policy tests that need three routes (enforce,
// observe, a small max_body_size): JSON-RPC batches with a denied call,
// phishing and malformed handshake actions, and the body limit.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

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

// newPolicyRoutesHarness starts the demo MCP server with the policy tools of
// AddPolicyTools and AddPolicyActionTools (SSE at mcpserver.Path, JSON at
// policyJSONPath; the Host check of the SDK is off since requests arrive
// with Host pmHostName) and Caddy in front of it with three routes:
//
//	/observe/*  handshake_actions observe, no tool rules
//	/small/*    max_body_size 4KiB and a tool policy
//	else        a default-deny tool policy with consent_url,
//	            handshake_actions enforce
func newPolicyRoutesHarness(t *testing.T) *pmHarness {
	t.Helper()
	s := mcpserver.New(mcpserver.Options{CountInterval: countInterval})
	mcpserver.AddPolicyTools(s)
	mcpserver.AddPolicyActionTools(s)
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
