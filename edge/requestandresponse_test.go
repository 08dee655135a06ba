package edge

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// TestRequestAndResponseRefused: a message with both "method" and
// "result" (or "error") is no request and no response to the edge, yet the
// Go SDK runs it as a request. On a route without a tool policy it would
// slip past the 2026 framing check (nothing to mirror) and the URL guard
// (nothing to check the answer against), so wherever those apply it is
// refused 400 with -32600, a message saying why, and never forwarded.
func TestRequestAndResponseRefused(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	const call = `"params":{"name":"delete_everything","arguments":{}%s}`
	mixed := map[string]string{
		"method and result":       `{"jsonrpc":"2.0","id":6,"method":"tools/call","result":{},` + call + `}`,
		"result before method":    `{"jsonrpc":"2.0","id":6,"result":{},"method":"tools/call",` + call + `}`,
		"method and error":        `{"jsonrpc":"2.0","id":6,"method":"tools/call","error":{"code":1,"message":"x"},` + call + `}`,
		"in a batch":              `[{"jsonrpc":"2.0","id":6,"method":"tools/call","result":{},` + call + `}]`,
		"notification and result": `{"jsonrpc":"2.0","method":"tools/call","result":{},` + call + `}`,
	}
	routes := []struct {
		name string
		mod  func(*setup)
		eras []string
	}{
		{"plain route, URL guard on", func(c *setup) { c.RequestProof = "off" }, []string{"2025", "2026"}},
		{"plain route, URL guard off", func(c *setup) { c.RequestProof, c.HandshakeActions = "off", "off" }, []string{"2026"}},
		{"tool policy", func(c *setup) { c.Tools, c.ToolDefault = polTools(), "allow" }, []string{"2025", "2026"}},
	}
	for _, route := range routes {
		h := f.handler(t, route.mod)
		for _, era := range route.eras {
			for name, body := range mixed {
				what := route.name + ", " + era + ", " + name
				meta := ""
				if era == "2026" {
					meta = "," + meta2026
				}
				r := polPost(strings.Replace(body, "%s", meta, 1), tok)
				if era == "2026" {
					post26(r, mcp.MethodToolsCall).Header.Set(mcp.HeaderName, "delete_everything")
				}
				res := polServe(t, h, r, nil)
				rtNotForwarded(t, res, what)
				var e struct {
					ID    json.RawMessage
					Error struct {
						Code    int
						Message string
					}
				}
				if res.rec.Code != http.StatusBadRequest || json.Unmarshal(res.rec.Body.Bytes(), &e) != nil ||
					e.Error.Code != mcp.CodeInvalidRequest || string(e.ID) != "null" {
					t.Errorf("%s: HTTP %d %s, want 400 with -32600", what, res.rec.Code, res.rec.Body)
					continue
				}
				if !strings.Contains(e.Error.Message, `"method" and also "result" or "error"`) {
					t.Errorf("%s: message %q does not say why", what, e.Error.Message)
				}
			}
		}
	}
	// The control: the call alone passes on the plain route.
	h := f.handler(t, func(c *setup) { c.RequestProof = "off" })
	if res := polServe(t, h, polPost(polCall(6, "delete_everything"), tok), nil); !res.called {
		t.Errorf("plain call: HTTP %d %s", res.rec.Code, res.rec.Body)
	}
}
