package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

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

// TestPolicyBodyLimit: on a route with max_body_size 4KiB and a tool
// policy, a JSON-RPC body of exactly 4KiB goes through, and one byte more is
// refused with 413 and the edge's JSON error body, whether the size is
// declared (Content-Length) or discovered (chunked), and whatever the
// content type; nothing of a refused request reaches the upstream. The SDK
// client sees the refusal as a failed call.
func TestPolicyBodyLimit(t *testing.T) {
	m := newPolicyRoutesHarness(t)
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
