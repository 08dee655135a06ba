package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// policyConfig is the per-tool policy of TestPolicySDK. The world's
// credentials grant greet:execute and files:read.
const policyConfig = `tool greet {
			scopes greet:execute
		}
		tool files_* {
			scopes files:read
		}
		tool files_write {
			scopes files:write
		}
		tool whoami {
			allow_anonymous
		}
		tool link_*
		tool count
		consent_url https://consent.example.test/approve
		handshake_action_hosts ` + mcpserver.AllowedAuthHost

// TestPolicySDK: the real Go-SDK client through the real Caddy binary, in
// front of the real Go-SDK server answering with SSE streams and with JSON
// bodies. tools/list shows only the tools the delegation allows; a call
// lacking a scope gets an isError result with an auth_required handshake
// action, and never reaches the upstream; handshake actions of tool results
// are checked on the way back.
func TestPolicySDK(t *testing.T) {
	h := newPolicyHarness(t, policyConfig)
	w := newWorld(t, h)
	tok := w.jwt(t)
	auth := http.Header{"Authorization": {"Bearer " + tok}}

	for _, path := range []string{mcpserver.Path, policyJSONPath} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			ctx := testContext(t)
			cs := h.mustConnect(ctx, path, auth, legacyProtocol, nil)

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			want := []string{"count", "files_read", "greet", "link_allowed", "link_foreign", "whoami"}
			if got := listedTools(tools); !slices.Equal(got, want) {
				t.Errorf("tools/list = %v, want %v", got, want)
			}

			h.upstream.Reset()
			greet(ctx, t, cs)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "files_read"})
			if err != nil || res.IsError {
				t.Fatalf("files_read: %v %+v", err, res)
			}

			// Missing scope: a consent link, at the edge.
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "files_write", Arguments: map[string]any{"path": "/x"}})
			if err != nil {
				t.Fatalf("files_write: %v", err)
			}
			a := handshakeAction(res)
			if !res.IsError || a["_action"] != "auth_required" || a["provider"] != "mcp-i" {
				t.Fatalf("files_write: isError=%t handshakeAction %v", res.IsError, a)
			}
			u, err := url.Parse(a["authUrl"].(string))
			if err != nil || u.Host != "consent.example.test" {
				t.Fatalf("authUrl %v", a["authUrl"])
			}
			q := u.Query()
			if q.Get("tool") != "files_write" || q.Get("scopes") != "files:write" || q.Get("agent_did") != w.agent.did || q.Get("resume_token") == "" {
				t.Errorf("authUrl query %v", q)
			}

			// No rule, default deny.
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "admin_reset"})
			if err != nil || !res.IsError {
				t.Fatalf("admin_reset: %v %+v", err, res)
			}

			// Handshake actions coming back from the upstream.
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "link_foreign"})
			if err != nil {
				t.Fatalf("link_foreign: %v", err)
			}
			if sc, _ := res.StructuredContent.(map[string]any); !res.IsError || sc["error"] != "handshake_action_rejected" {
				t.Errorf("link_foreign: isError=%t structuredContent %v", res.IsError, res.StructuredContent)
			}
			if handshakeAction(res) != nil {
				t.Error("link_foreign: the foreign action reached the client")
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "link_allowed"})
			if err != nil || res.IsError {
				t.Fatalf("link_allowed: %v %+v", err, res)
			}
			if got := handshakeAction(res)["authUrl"]; got != mcpserver.AllowedAuthURL+"&context_did="+url.QueryEscape(w.user.did) {
				t.Errorf("link_allowed authUrl %v", got)
			}

			called := calledTools(h.upstream.Requests())
			if want := []string{"greet", "files_read", "link_foreign", "link_allowed"}; !slices.Equal(called, want) {
				t.Errorf("upstream ran %v, want %v", called, want)
			}
		})
	}

	// A wrapped tools/call still streams: progress notifications arrive as
	// they are sent, not with the result.
	t.Run("streaming", func(t *testing.T) {
		ctx := testContext(t)
		firstc := make(chan time.Time, 1)
		opts := &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case firstc <- time.Now():
			default:
			}
		}}
		cs := h.mustConnect(ctx, mcpserver.Path, auth, legacyProtocol, opts)
		params := &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"n": 3}}
		params.SetProgressToken("p1")
		res, err := cs.CallTool(ctx, params)
		done := time.Now()
		if err != nil || res.IsError {
			t.Fatalf("count: %v %+v", err, res)
		}
		select {
		case first := <-firstc:
			if done.Sub(first) < 2*countInterval {
				t.Errorf("first progress %v before the result, want at least %v: the stream was buffered", done.Sub(first), 2*countInterval)
			}
		default:
			t.Error("no progress notification")
		}
	})

	t.Run("anonymous", func(t *testing.T) {
		ctx := testContext(t)
		cs := h.mustConnect(ctx, mcpserver.Path, nil, legacyProtocol, nil)
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if got := listedTools(tools); !slices.Equal(got, []string{"whoami"}) {
			t.Errorf("anonymous tools/list = %v, want [whoami]", got)
		}
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"}); err != nil || res.IsError {
			t.Fatalf("anonymous whoami: %v %+v", err, res)
		}
		h.upstream.Reset()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}}); err == nil {
			t.Error("anonymous greet succeeded")
		}
		if called := calledTools(h.upstream.Requests()); len(called) != 0 {
			t.Errorf("upstream ran %v for an anonymous caller", called)
		}
		resp := h.post(ctx, mcpserver.Path, nil, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "greet"}})
		h.assertEdgeError(t, resp, http.StatusUnauthorized, "invalid_token")
	})
}

// TestPolicyToolsListDuplicateIDsSDK: the real Go-SDK server (batches are
// accepted for protocol 2025-03-26). An anonymous agent sends tools/list and
// ping under one id in a batch; the edge once kept the last method (ping)
// for the id and passed the tools/list answer unfiltered. The batch is now
// refused at the edge (400, -32600) and never reaches the upstream; the
// same batch with distinct ids goes through, filtered.
func TestPolicyToolsListDuplicateIDsSDK(t *testing.T) {
	h := newPolicyHarness(t, policyConfig)
	ctx := testContext(t)
	const oldProtocol = "2025-03-26"
	listed := func(resp rpcResponse) []string {
		var names []string
		for _, m := range resp.Msgs {
			res, _ := m["result"].(map[string]any)
			tools, _ := res["tools"].([]any)
			for _, tl := range tools {
				name, _ := tl.(map[string]any)["name"].(string)
				names = append(names, name)
			}
		}
		return names
	}
	for _, path := range []string{policyJSONPath, mcpserver.Path} {
		t.Run(path, func(t *testing.T) {
			session := rawInitialize(ctx, t, h, path, oldProtocol)
			hdr := http.Header{"Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {oldProtocol}}
			for _, batch := range []string{
				`[{"jsonrpc":"2.0","id":7,"method":"tools/list"},{"jsonrpc":"2.0","id":7,"method":"ping"}]`,
				`[{"jsonrpc":"2.0","id":7,"method":"tools/list"},{"jsonrpc":"2.0","id":7.0,"method":"ping"}]`,
			} {
				h.upstream.Reset()
				resp := rawPost(ctx, t, h, path, batch, hdr)
				// whoami is the only anonymous tool of policyConfig.
				if got := listed(resp); slices.ContainsFunc(got, func(n string) bool { return n != "whoami" }) {
					t.Fatalf("BYPASS: anonymous agent got the unfiltered tool list %v", got)
				}
				if resp.Status != http.StatusBadRequest || len(resp.Msgs) != 1 || resp.Msgs[0]["id"] != nil {
					t.Fatalf("batch %s: HTTP %d %s, want 400 with a JSON-RPC error", batch, resp.Status, resp.Body)
				}
				if e, _ := resp.Msgs[0]["error"].(map[string]any); e["code"] != float64(-32600) {
					t.Errorf("error %v, want -32600", e)
				}
				if n := len(h.upstream.Requests()); n != 0 {
					t.Errorf("%d requests reached the upstream", n)
				}
			}
			resp := rawPost(ctx, t, h, path, `[{"jsonrpc":"2.0","id":8,"method":"tools/list"},{"jsonrpc":"2.0","id":9,"method":"ping"}]`, hdr)
			if got := listed(resp); resp.Status != http.StatusOK || !slices.Equal(got, []string{"whoami"}) {
				t.Fatalf("distinct ids: HTTP %d, tools %v: %s", resp.Status, got, resp.Body)
			}
		})
	}
}

// TestPolicyMethodsSDK: through the real Caddy, a tools/call the policy
// denies is not forwarded whatever the method spelling; a GET may not
// carry a body, and a compressed or non-UTF-8 body is refused, while the
// SDK client's own GET stream and DELETE keep working.
func TestPolicyMethodsSDK(t *testing.T) {
	h := newPolicyHarness(t, policyConfig)
	w := newWorld(t, h)
	ctx := testContext(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	denied := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files_write","arguments":{}}}`
	send := func(method, body string, hdr http.Header) rpcResponse {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, h.base+mcpserver.Path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range auth {
			req.Header[k] = v
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		return h.do(req)
	}
	for _, tc := range []struct {
		method string
		hdr    http.Header
		status int
	}{
		{"post", nil, http.StatusOK}, // answered by the edge: a tool error
		{http.MethodPut, nil, http.StatusOK},
		{http.MethodPatch, nil, http.StatusOK},
		{http.MethodGet, nil, http.StatusBadRequest},
		{http.MethodDelete, nil, http.StatusBadRequest},
		{http.MethodPost, http.Header{"Content-Encoding": {"gzip"}}, http.StatusUnsupportedMediaType},
		{http.MethodPost, http.Header{"Content-Type": {"application/json; charset=utf-7"}}, http.StatusUnsupportedMediaType},
	} {
		h.upstream.Reset()
		resp := send(tc.method, denied, tc.hdr)
		if calls := calledTools(h.upstream.Requests()); len(calls) != 0 || len(h.upstream.Requests()) != 0 {
			t.Errorf("%s %v: forwarded (%v)", tc.method, tc.hdr, calls)
		}
		if resp.Status != tc.status {
			t.Errorf("%s %v: HTTP %d %s, want %d", tc.method, tc.hdr, resp.Status, resp.Body, tc.status)
		}
	}

	// The SDK client: initialize, its GET stream, a call, and DELETE at
	// Close all go through.
	cs := h.mustConnect(ctx, mcpserver.Path, auth, legacyProtocol, nil)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "x"}}); err != nil {
		t.Fatalf("greet: %v", err)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	var deleted bool
	for _, r := range h.upstream.Requests() {
		deleted = deleted || r.Method == http.MethodDelete
	}
	if !deleted {
		t.Error("the session's DELETE did not reach the upstream")
	}
}

// TestPolicyToolsListSmuggled, through the real Caddy. An
// upstream answers tools/list with the denied tools under "TOOLS", "Tools",
// "toolſ", a repeated "tools", or a tool's "Name" beside its "name", as
// JSON and as an SSE event: encoding/json clients read those lists, so the
// edge withholds the answer (-32603 for the id) and no denied tool reaches
// the anonymous agent.
func TestPolicyToolsListSmuggled(t *testing.T) {
	results := map[string]string{
		"TOOLS":         `{"tools":[{"name":"whoami"}],"TOOLS":[{"name":"whoami"},{"name":"files_write","description":"denied"}]}`,
		"Tools":         `{"Tools":[{"name":"files_write"}]}`,
		"long s":        `{"tools":[],"toolſ":[{"name":"files_write"}]}`,
		"tools twice":   `{"tools":[],"tools":[{"name":"files_write"}]}`,
		"name and Name": `{"tools":[{"name":"whoami","Name":"files_write"}]}`,
	}
	upstream := answerWith(func(id string, q url.Values) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":` + results[q.Get("shape")] + `}`
	})
	h := startPolicyEdge(t, upstream, policyConfig)
	ctx := testContext(t)
	for shape := range results {
		for _, sse := range []string{"", "1"} {
			t.Run(shape+" sse="+sse, func(t *testing.T) {
				h.upstream.Reset()
				path := "/mcp?shape=" + url.QueryEscape(shape) + "&sse=" + sse
				resp := postWithheld(ctx, t, h, path, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, http.Header{})
				if len(h.upstream.Requests()) != 1 {
					t.Fatalf("not forwarded: HTTP %d %s", resp.Status, resp.Body)
				}
				if bytes.Contains(resp.Body, []byte("files_write")) {
					t.Fatalf("BYPASS: the denied tool reached the agent: %s", resp.Body)
				}
				if len(resp.Msgs) != 1 || resp.Msgs[0]["id"] != float64(5) || resp.Msgs[0]["result"] != nil {
					t.Fatalf("HTTP %d %s, want one error for id 5", resp.Status, resp.Body)
				}
				if e, _ := resp.Msgs[0]["error"].(map[string]any); e["code"] != float64(-32603) {
					t.Errorf("error %v, want -32603", e)
				}
			})
		}
	}
}

// postWithheld is rawPost for an answer the edge may withhold mid-stream:
// a refused SSE event ends the stream with the failure event, and Caddy's
// reverse_proxy then aborts the response (the client reads what came, then
// an unexpected EOF).
func postWithheld(ctx context.Context, t *testing.T, h *harness, path, body string, hdr http.Header) rpcResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading response: %v", err)
	}
	return rpcResponse{Status: resp.StatusCode, Header: resp.Header, Body: data, Msgs: parseMessages(resp.Header.Get("Content-Type"), data)}
}

// answerWith is an upstream answering each POST with answer(the request's
// id, the query): as an SSE event when the query has sse, else as JSON.
func answerWith(answer func(id string, q url.Values) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		a := answer(string(req.ID), r.URL.Query())
		if r.URL.Query().Get("sse") != "" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: "+a+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, a)
	})
}
