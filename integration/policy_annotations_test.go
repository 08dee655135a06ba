package integration

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// annotationsPolicyConfig guards the tools no rule names by the class of
// their annotations: files_read (readOnlyHint) needs files:read; files_write
// and admin_reset (destructiveHint) and the unannotated demo tools need
// files:write. greet keeps its explicit rule.
const annotationsPolicyConfig = `tool greet {
			scopes greet:execute
		}
		tool_annotations_policy {
			read_only files:read
			destructive files:write
		}
		consent_url https://consent.example.test/approve`

// TestPolicyAnnotationsSDK: the Go-SDK client through the real Caddy binary
// in front of the Go-SDK server (SSE and JSON answers). Until a tools/list
// went through, tool_default (deny) decides; after it, the read-only tool is
// callable with the read scope, and the destructive one gets the
// auth_required result naming the write scope, at the edge.
func TestPolicyAnnotationsSDK(t *testing.T) {
	for _, path := range []string{mcpserver.Path, policyJSONPath} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			h := newPolicyHarness(t, annotationsPolicyConfig)
			w := newWorld(t, h)
			ctx := testContext(t)
			reader := http.Header{"Authorization": {"Bearer " + w.jwt(t)}} // greet:execute files:read
			cs := h.mustConnect(ctx, path, reader, legacyProtocol, nil)
			h.upstream.Reset()

			// Unseen: no class yet, tool_default deny.
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "files_read"})
			if sc, _ := res.StructuredContent.(map[string]any); err != nil || !res.IsError || sc["error"] != "tool_not_allowed" {
				t.Fatalf("files_read before tools/list: %v %+v", err, res)
			}

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if got, want := listedTools(tools), []string{"files_read", "greet"}; !slices.Equal(got, want) {
				t.Errorf("tools/list = %v, want %v", got, want)
			}

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "files_read"})
			if err != nil || res.IsError {
				t.Fatalf("files_read: %v %+v", err, res)
			}
			greet(ctx, t, cs)

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "files_write"})
			if err != nil {
				t.Fatalf("files_write: %v", err)
			}
			a := handshakeAction(res)
			if !res.IsError || a["_action"] != "auth_required" {
				t.Fatalf("files_write: isError=%t handshakeAction %v", res.IsError, a)
			}
			u, err := url.Parse(a["authUrl"].(string))
			if err != nil || u.Host != "consent.example.test" || u.Query().Get("tool") != "files_write" || u.Query().Get("scopes") != "files:write" {
				t.Errorf("authUrl %v", a["authUrl"])
			}
			if called := calledTools(h.upstream.Requests()); !slices.Equal(called, []string{"files_read", "greet"}) {
				t.Errorf("upstream ran %v, want [files_read greet]", called)
			}

			// The write scope unlocks the destructive tools, annotated or
			// not, but not the read-only one.
			writer := http.Header{"Authorization": {"Bearer " + w.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"files:write"} })}}
			cw := h.mustConnect(ctx, path, writer, legacyProtocol, nil)
			tools, err = cw.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list (writer): %v", err)
			}
			want := []string{"admin_reset", "count", "files_write", "link_allowed", "link_foreign", "whoami"}
			if got := listedTools(tools); !slices.Equal(got, want) {
				t.Errorf("tools/list (writer) = %v, want %v", got, want)
			}
			for _, tool := range []string{"files_write", "whoami"} {
				if res, err := cw.CallTool(ctx, &mcp.CallToolParams{Name: tool}); err != nil || res.IsError {
					t.Errorf("%s with files:write: %v %+v", tool, err, res)
				}
			}
			if res, err := cw.CallTool(ctx, &mcp.CallToolParams{Name: "files_read"}); err != nil || !res.IsError || handshakeAction(res)["_action"] != "auth_required" {
				t.Errorf("files_read with files:write only: %v %+v", err, res)
			}
		})
	}
}
