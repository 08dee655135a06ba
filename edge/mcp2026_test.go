package edge

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// MCP 2026-07-28 at the edge: framing, response shapes, prompts.

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`

// call2026 is a 2026 tools/call of tool with the headers a 2026 client sends
// (method and name header as given; "" leaves one out).
func call2026(id int, tool, tok, hMethod, hName string, extraMeta string) *http.Request {
	r := polPost(body2026(id, tool, extraMeta), tok)
	r.Header.Set(mcp.HeaderProtocolVersion, mcp.Version2026)
	if hMethod != "" {
		r.Header.Set(mcp.HeaderMethod, hMethod)
	}
	if hName != "" {
		r.Header.Set(mcp.HeaderName, hName)
	}
	return r
}

func body2026(id int, tool, extraMeta string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"x":1},%s}}`,
		id, tool, strings.Replace(meta2026, "}", extraMeta+"}", 1))
}

func TestFraming2026(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	for _, withPolicy := range []bool{true, false} {
		h := polHandler(t, f, func(h *Handler) {
			if !withPolicy {
				h.Tools = nil
			}
		})
		name := map[bool]string{true: "policy/", false: "no policy/"}[withPolicy]
		for _, tt := range []struct {
			name          string
			method, tname string
			tool          string
			tok           string
		}{
			{"name says echo, body admin_delete", "tools/call", "echo", "admin_delete", tok},
			{"name says admin_delete, body echo", "tools/call", "admin_delete", "echo", tok},
			{"method says tools/list", "tools/list", "echo", "echo", tok},
			{"method missing", "", "echo", "echo", tok},
			{"name missing", "tools/call", "", "echo", tok},
			{"no credential either", "tools/call", "x", "echo", ""},
		} {
			t.Run(name+tt.name, func(t *testing.T) {
				res := polServe(t, h, call2026(4, tt.tool, tt.tok, tt.method, tt.tname, ""), nil)
				if res.called {
					t.Fatal("a mismatched request reached the upstream")
				}
				if res.rec.Code != http.StatusBadRequest {
					t.Fatalf("HTTP %d, want 400: %s", res.rec.Code, res.rec.Body)
				}
				m := decodeRPC(t, res.rec.Body.Bytes())
				if m.Error == nil || m.Error.Code != mcp.CodeHeaderMismatch || string(m.ID) != "4" {
					t.Fatalf("want error -32020 for id 4: %s", res.rec.Body)
				}
			})
		}
		t.Run(name+"matching headers pass byte for byte", func(t *testing.T) {
			r := call2026(5, "echo", tok, "tools/call", "echo", "")
			want := body2026(5, "echo", "")
			res := polServe(t, h, r, nil)
			if !res.called || string(res.fwdBody) != want {
				t.Fatalf("called %v, forwarded %s, want %s (%d %s)", res.called, res.fwdBody, want, res.rec.Code, res.rec.Body)
			}
		})
		t.Run(name+"base64 Mcp-Name", func(t *testing.T) {
			res := polServe(t, h, call2026(5, "echo", tok, "tools/call", "=?base64?ZWNobw==?=", ""), nil)
			if !res.called {
				t.Fatalf("refused: %d %s", res.rec.Code, res.rec.Body)
			}
		})
		t.Run(name+"_meta version without the header", func(t *testing.T) {
			r := call2026(6, "echo", tok, "tools/call", "echo", "")
			r.Header.Del(mcp.HeaderProtocolVersion)
			res := polServe(t, h, r, nil)
			if res.called || res.rec.Code != http.StatusBadRequest || decodeRPC(t, res.rec.Body.Bytes()).Error.Code != mcp.CodeHeaderMismatch {
				t.Fatalf("called %v, %d %s", res.called, res.rec.Code, res.rec.Body)
			}
		})
		t.Run(name+"2025 request with stray headers untouched", func(t *testing.T) {
			body := polCall(8, "echo")
			r := polPost(body, tok)
			r.Header.Set(mcp.HeaderProtocolVersion, "2025-11-25")
			r.Header.Set(mcp.HeaderName, "admin_delete")
			res := polServe(t, h, r, nil)
			if !res.called || string(res.fwdBody) != body {
				t.Fatalf("2025 request changed: called %v %s", res.called, res.fwdBody)
			}
		})
	}
}
