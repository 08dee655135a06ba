package integration

import (
	"context"
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
