package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// legacyProtocol is the newest MCP version that uses the initialize
// handshake and Mcp-Session-Id; the SDK's default (2026-07-28) is sessionless
// and starts with server/discover instead. Most tests pin it so the
// handshake the brief describes really crosses the edge; TestCarriersSDK also
// runs the default.
const legacyProtocol = "2025-11-25"

// party is a DID with its key: an issuer, an agent or a user.
type party struct {
	key crypto.PrivateKey
	did string
	kid string
}

func newParty(t *testing.T, kt didresolver.KeyType) party {
	t.Helper()
	priv, err := didresolver.GenerateKey(kt)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := didresolver.PublicKeyOf(priv)
	if err != nil {
		t.Fatal(err)
	}
	did, kid, err := didresolver.KeyDID(pub)
	if err != nil {
		t.Fatal(err)
	}
	return party{key: priv, did: did, kid: kid}
}

// world is the cast of one test: an Ed25519 issuer (the user's delegation
// authority), the agent it delegates to, and the user.
type world struct {
	issuer, agent, user party
	audience            string
}

func newWorld(t *testing.T, h *harness) *world {
	return &world{
		issuer:   newParty(t, didresolver.Ed25519),
		agent:    newParty(t, didresolver.Ed25519),
		user:     newParty(t, didresolver.Ed25519),
		audience: h.hostAudience(),
	}
}

// template is a valid delegation for this world; mutate adjusts it per case.
func (w *world) template(mutate ...func(*vc.Template)) vc.Template {
	now := time.Now()
	tmpl := vc.Template{
		AgentDID:  w.agent.did,
		UserDID:   w.user.did,
		Audience:  []string{w.audience},
		Scopes:    []string{"greet:execute", "files:read"},
		NotBefore: now.Add(-time.Minute),
		ExpiresAt: now.Add(time.Hour),
	}
	for _, m := range mutate {
		m(&tmpl)
	}
	return tmpl
}

// jwt mints a VC-JWT signed by the world's issuer.
func (w *world) jwt(t *testing.T, mutate ...func(*vc.Template)) string {
	t.Helper()
	return issueJWT(t, w.issuer.key, w.issuer.kid, w.template(mutate...))
}

func issueJWT(t *testing.T, key crypto.PrivateKey, kid string, tmpl vc.Template) string {
	t.Helper()
	tok, err := vc.IssueJWT(key, kid, tmpl)
	if err != nil {
		t.Fatalf("IssueJWT: %v", err)
	}
	return tok
}

// jsonVC mints an MCP-I JSON VC and returns it with the proof's signature
// value (what must never reach the upstream).
func (w *world) jsonVC(t *testing.T, mutate ...func(*vc.Template)) (json.RawMessage, string) {
	t.Helper()
	key, ok := w.issuer.key.(ed25519.PrivateKey)
	if !ok {
		t.Fatalf("issuer key is %T, IssueJSON needs Ed25519", w.issuer.key)
	}
	raw, err := vc.IssueJSON(key, w.issuer.kid, w.template(mutate...))
	if err != nil {
		t.Fatalf("IssueJSON: %v", err)
	}
	var doc struct {
		Proof struct {
			ProofValue string `json:"proofValue"`
			JWS        string `json:"jws"`
		} `json:"proof"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("IssueJSON output is not JSON: %v", err)
	}
	sig := doc.Proof.ProofValue + doc.Proof.JWS
	if sig == "" {
		t.Fatalf("IssueJSON output has no proof.proofValue: %s", raw)
	}
	return raw, sig
}

// tamper flips one character in the middle of a JWS signature, so the token
// stays well-formed but no longer verifies. (The last character is avoided:
// its low bits may be padding that decoders ignore.)
func tamper(jws string) string {
	i := strings.LastIndexByte(jws, '.') + (len(jws)-strings.LastIndexByte(jws, '.'))/2
	b := []byte(jws)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// headerRT adds headers to every request the SDK client sends (POST, the
// standalone GET stream, DELETE), with their names exactly as given: map
// assignment bypasses canonicalisation, so odd-case spoof headers go out as
// written.
type headerRT struct {
	base http.RoundTripper
	h    http.Header
	// each, when set, adjusts every request after h was added.
	each func(*http.Request)
}

func (rt headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range rt.h {
		r.Header[k] = v
	}
	if rt.each != nil {
		rt.each(r)
	}
	return rt.base.RoundTrip(r)
}

// connect opens an SDK client session through the edge at path, adding hdr to
// every request. version "" is the SDK default.
func (h *harness) connect(ctx context.Context, path string, hdr http.Header, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	return h.connectWith(ctx, path, hdr, version, opts, nil)
}

// connectWith is connect with a hook to adjust the transport.
func (h *harness) connectWith(ctx context.Context, path string, hdr http.Header, version string, opts *mcp.ClientOptions, configure func(*mcp.StreamableClientTransport)) (*mcp.ClientSession, error) {
	// ResponseHeaderTimeout bounds the wait for headers only, never a
	// stream's body. Without it a buffering edge would hang the test: the
	// SDK's Connect waits, on a context of its own, for the headers of the
	// standalone GET stream, which a buffering proxy sends only when the
	// stream ends.
	tr := &http.Transport{ResponseHeaderTimeout: 10 * time.Second}
	h.t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "integration", Version: "0"}, opts)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   h.base + path,
		HTTPClient: &http.Client{Transport: headerRT{base: tr, h: hdr, each: h.perRequest}},
		// A rejected request must fail the call, not be retried.
		MaxRetries: -1,
	}
	if configure != nil {
		configure(transport)
	}
	return client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

// mustConnect is connect that fails the test, and closes the session at the
// end of it.
func (h *harness) mustConnect(ctx context.Context, path string, hdr http.Header, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	h.t.Helper()
	cs, err := h.connect(ctx, path, hdr, version, opts)
	if err != nil {
		h.t.Fatalf("connect through the edge: %v", err)
	}
	h.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// greet calls the greet tool and checks its answer.
func greet(ctx context.Context, t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}})
	if err != nil {
		t.Fatalf("tools/call greet: %v", err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("tools/call greet: %+v", res)
	}
	if text, _ := res.Content[0].(*mcp.TextContent); text == nil || text.Text != "Hello, Ada" {
		t.Fatalf("tools/call greet = %#v, want text \"Hello, Ada\"", res.Content[0])
	}
}

// rpcResponse is one raw HTTP exchange with the edge.
type rpcResponse struct {
	Status int
	Header http.Header
	Body   []byte
	// Msgs are the JSON-RPC messages of the body (JSON or SSE).
	Msgs []map[string]any
}

// result returns the "result" object of the response to id, failing the test
// if there is none.
func (r rpcResponse) result(t *testing.T, id int) map[string]any {
	t.Helper()
	for _, m := range r.Msgs {
		if n, ok := m["id"].(float64); ok && int(n) == id {
			res, ok := m["result"].(map[string]any)
			if !ok {
				t.Fatalf("JSON-RPC response %d has no result: %v", id, m)
			}
			return res
		}
	}
	t.Fatalf("no JSON-RPC response with id %d (HTTP %d): %s", id, r.Status, r.Body)
	return nil
}

// post sends one raw JSON-RPC POST to path, with hdr added verbatim and the
// session id if non-empty. The SDK client cannot put a credential into the
// body (params.delegationToken, arguments._mcpi_delegation), hence this.
func (h *harness) post(ctx context.Context, path string, hdr http.Header, session string, msg any) rpcResponse {
	h.t.Helper()
	body, err := json.Marshal(msg)
	if err != nil {
		h.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", legacyProtocol)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	return h.do(req)
}

func (h *harness) do(req *http.Request) rpcResponse {
	h.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("reading response: %v", err)
	}
	out := rpcResponse{Status: resp.StatusCode, Header: resp.Header, Body: data}
	out.Msgs = parseMessages(resp.Header.Get("Content-Type"), data)
	return out
}

// parseMessages decodes JSON-RPC messages from a JSON body (one message or a
// batch) or from an SSE stream (one message per event's data).
func parseMessages(contentType string, body []byte) []map[string]any {
	mt, _, _ := mime.ParseMediaType(contentType)
	var msgs []map[string]any
	switch mt {
	case "application/json":
		var one map[string]any
		if json.Unmarshal(body, &one) == nil {
			return []map[string]any{one}
		}
		_ = json.Unmarshal(body, &msgs)
	case "text/event-stream":
		var data []string
		flush := func() {
			if len(data) > 0 {
				var m map[string]any
				if json.Unmarshal([]byte(strings.Join(data, "\n")), &m) == nil {
					msgs = append(msgs, m)
				}
			}
			data = nil
		}
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				flush()
			} else if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
			}
		}
		flush()
	}
	return msgs
}

// initialize performs the raw initialize handshake (initialize, then
// notifications/initialized) with hdr and the params extras on both, and
// returns the session id.
func (h *harness) initialize(ctx context.Context, path string, hdr http.Header, extra map[string]any) string {
	h.t.Helper()
	params := map[string]any{
		"protocolVersion": legacyProtocol,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "raw", "version": "0"},
	}
	for k, v := range extra {
		params[k] = v
	}
	resp := h.post(ctx, path, hdr, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
	if resp.Status != http.StatusOK {
		h.t.Fatalf("initialize: HTTP %d %s", resp.Status, resp.Body)
	}
	if v := resp.result(h.t, 1)["protocolVersion"]; v != legacyProtocol {
		h.t.Fatalf("initialize: protocolVersion %v", v)
	}
	session := resp.Header.Get("Mcp-Session-Id")
	if session == "" {
		h.t.Fatalf("initialize: no Mcp-Session-Id")
	}
	notif := map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized", "params": map[string]any{}}
	if len(extra) > 0 {
		notif["params"] = extra
	}
	if resp := h.post(ctx, path, hdr, session, notif); resp.Status != http.StatusAccepted {
		h.t.Fatalf("notifications/initialized: HTTP %d %s", resp.Status, resp.Body)
	}
	return session
}

// carrierHeaders are the header carriers of docs/protocol/mcpi.md#carriers (lower case).
var carrierHeaders = []string{"authorization", "dpop", "kya-delegation", "kya-os-delegation-credential", "mcp-i-credential", "mcp-i-delegation"}

// identityHeaderNames are the headers only the edge may set (lower case, "-").
var identityHeaderNames = []string{"x-agent-did", "x-user-did", "x-verified-delegation", "x-agent-reputation-score"}

// normName folds a header name the way the edge must: case-insensitive, and
// "_" equal to "-" (some servers treat them alike).
func normName(k string) string { return strings.ReplaceAll(strings.ToLower(k), "_", "-") }

// identityHeaders lists the identity headers (any spelling, any KYA-*) in h.
func identityHeaders(h http.Header) []string {
	var found []string
	for k := range h {
		n := normName(k)
		if slices.Contains(identityHeaderNames, n) || strings.HasPrefix(n, "kya-") {
			found = append(found, k)
		}
	}
	slices.Sort(found)
	return found
}

// listToolsAdmitted connects to path with hdr through the SDK client and
// lists the tools: the call must reach the upstream and none of secrets
// may. It returns what the upstream received.
func (h *harness) listToolsAdmitted(t *testing.T, path string, hdr http.Header, secrets ...string) []record {
	t.Helper()
	h.upstream.Reset()
	ctx := testContext(t)
	cs := h.mustConnect(ctx, path, hdr, legacyProtocol, nil)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if len(tools.Tools) == 0 {
		t.Error("tools/list returned no tools")
	}
	reqs := h.upstream.Requests()
	if methods := rpcMethods(reqs); !slices.Contains(methods, "tools/list") {
		t.Errorf("upstream never saw tools/list (saw %v)", methods)
	}
	assertNotForwarded(t, reqs, secrets...)
	return reqs
}

// listToolsRefused POSTs a tools/list to path with hdr: the edge must
// refuse it with status, wantError and reason, and the upstream must have
// received nothing since its last Reset.
func (h *harness) listToolsRefused(ctx context.Context, t *testing.T, path string, hdr http.Header, status int, wantError, reason string) {
	t.Helper()
	resp := h.post(ctx, path, hdr, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	body := h.assertEdgeError(t, resp, status, wantError)
	if body.Reason != reason {
		t.Errorf("reason %q, want %s", body.Reason, reason)
	}
	if reqs := h.upstream.Requests(); len(reqs) != 0 {
		t.Errorf("upstream saw %d requests", len(reqs))
	}
}

// assertNotForwarded fails if any recorded header value or body contains one
// of secrets, or if a credential carrier header reached the upstream. Only
// names are printed: the secrets are credentials.
func assertNotForwarded(t *testing.T, reqs []record, secrets ...string) {
	t.Helper()
	for i, r := range reqs {
		for k, vs := range r.Header {
			if slices.Contains(carrierHeaders, normName(k)) {
				t.Errorf("upstream request %d (%s %s) carried header %s", i, r.Method, r.Path, k)
			}
			for _, v := range vs {
				for j, s := range secrets {
					if s != "" && strings.Contains(v, s) {
						t.Errorf("upstream request %d (%s %s): header %s contains secret #%d", i, r.Method, r.Path, k, j)
					}
				}
			}
		}
		for j, s := range secrets {
			if s != "" && bytes.Contains(r.Body, []byte(s)) {
				t.Errorf("upstream request %d (%s %s): body contains secret #%d", i, r.Method, r.Path, j)
			}
		}
		for _, key := range []string{`"delegationToken"`, `"_mcpi_delegation"`} {
			if bytes.Contains(r.Body, []byte(key)) {
				t.Errorf("upstream request %d (%s %s): body still has %s", i, r.Method, r.Path, key)
			}
		}
	}
}

// rpcMethods returns the JSON-RPC methods the upstream received, in order.
func rpcMethods(reqs []record) []string {
	var out []string
	for _, r := range reqs {
		if r.Method != http.MethodPost {
			continue
		}
		var one struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(r.Body, &one) == nil && one.Method != "" {
			out = append(out, one.Method)
		}
	}
	return out
}

// errorBody is the JSON body of the edge's 401/403/400 answers.
type errorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
	Reason      string `json:"reason"`
}

// assertEdgeError checks an edge rejection: status, JSON body, no-store,
// and a WWW-Authenticate that points at the resource metadata. It returns
// the decoded body.
func (h *harness) assertEdgeError(t *testing.T, resp rpcResponse, status int, wantError string) errorBody {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("HTTP %d, want %d; body %s", resp.Status, status, resp.Body)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", resp.Header.Get("Content-Type"))
	}
	var body errorBody
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, resp.Body)
	}
	if body.Error != wantError {
		t.Errorf("body error %q, want %q (body %s)", body.Error, wantError, resp.Body)
	}
	if body.Description == "" {
		t.Errorf("body has no error_description: %s", resp.Body)
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "no-store") {
			t.Errorf("Cache-Control %q, want no-store", cc)
		}
		wa := resp.Header.Get("WWW-Authenticate")
		if !strings.HasPrefix(wa, "Bearer ") {
			t.Errorf("WWW-Authenticate %q, want a Bearer challenge", wa)
		}
		// The per-path document of the URL requested (RFC 9728 §3.3).
		want := fmt.Sprintf(`resource_metadata="%s/.well-known/oauth-protected-resource`, h.base)
		if !strings.Contains(wa, want) {
			t.Errorf("WWW-Authenticate %q, want it to contain %s", wa, want)
		}
	}
	return body
}
