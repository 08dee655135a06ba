package edge

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// declared is a _meta member declaring the KYA-OS extension.
const declared = `"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"org.kya-os/decentralized-authority":{}}}}`

// strictRoutes are the routes on which a step decides on the body without
// a tool policy in the way, and with one.
var strictRoutes = []struct {
	name string
	mod  func(*setup)
}{
	{"request_proof required", func(c *setup) { c.RequestProof = "required" }},
	{"require_extension", func(c *setup) { c.RequireExtension = true }},
	{"required, require_extension", func(c *setup) { c.RequestProof, c.RequireExtension = "required", true }},
	{"tool policy, require_extension", func(c *setup) { c.Tools, c.ToolDefault, c.RequireExtension = polTools(), "allow", true }},
	{"tool policy, required", func(c *setup) { c.Tools, c.ToolDefault, c.RequestProof = polTools(), "allow", "required" }},
}

// post26 makes r a 2026-07-28 request whose headers name method.
func post26(r *http.Request, method string) *http.Request {
	r.Header.Set(mcp.HeaderProtocolVersion, mcp.Version2026)
	r.Header.Set(mcp.HeaderMethod, method)
	return r
}

// TestAmbiguousBodyNeverExempt: a body read one way by
// the edge's exact-name lookups and another way by an encoding/json
// upstream ("method":"ping" beside "Method":"tools/call", which Go decodes
// as tools/call) is refused 400 with JSON-RPC -32600 and never reaches the
// upstream, with a bare stolen credential (no proof, no declaration), in
// both eras, with and without a tool policy. A plain ping still passes.
func TestAmbiguousBodyNeverExempt(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	const call = `"params":{"name":"delete_everything","arguments":{}%s}`
	ambiguous := map[string]string{
		"Method after method":  `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call",` + call + `}`,
		"METHOD before method": `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","method":"ping",` + call + `}`,
		"method twice":         `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call",` + call + `}`,
		"Kelvin-free fold":     `{"jsonrpc":"2.0","id":1,"method":"ping","metho\u0044":"tools/call",` + call + `}`,
		"_meta twins":          `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"name":"x"%s,"_META":{}}}`,
	}
	for _, route := range strictRoutes {
		h := f.handler(t, route.mod)
		for _, era := range []string{"2025", "2026"} {
			meta := ""
			if era == "2026" {
				meta = "," + meta2026
			}
			req := func(body string) *http.Request {
				r := polPost(strings.Replace(body, "%s", meta, 1), tok)
				if era == "2026" {
					post26(r, "ping")
				}
				return r
			}
			for name, body := range ambiguous {
				res := polServe(t, h, req(body), nil)
				rtNotForwarded(t, res, route.name+", "+era+", "+name)
				var e struct {
					ID    json.RawMessage
					Error struct{ Code int }
				}
				if res.rec.Code != http.StatusBadRequest || json.Unmarshal(res.rec.Body.Bytes(), &e) != nil || e.Error.Code != mcp.CodeInvalidRequest || string(e.ID) != "null" {
					t.Errorf("%s, %s, %s: HTTP %d %s, want 400 with -32600", route.name, era, name, res.rec.Code, res.rec.Body)
				}
			}
			// The control: the same ping, read one way only, is exempt.
			ping := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{}}}`
			if era == "2026" {
				ping = `{"jsonrpc":"2.0","id":1,"method":"ping","params":{` + meta2026 + `}}`
			}
			if res := polServe(t, h, req(ping), nil); !res.called || res.rec.Code != http.StatusOK {
				t.Errorf("%s, %s, plain ping: HTTP %d %s", route.name, era, res.rec.Code, res.rec.Body)
			}
		}
	}
}

// TestAmbiguousBodyOnPlainRoute: a route that decides nothing on the body
// (request_proof off, no declaration gate, no tool policy) forwards a 2025
// body as it is: the edge adds no parse there. A 2026 one is framed, so
// refused.
func TestAmbiguousBodyOnPlainRoute(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) { c.RequestProof = "off" })
	body := `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"x","arguments":{},` + meta2026 + `}}`
	if res := polServe(t, h, polPost(strings.Replace(body, ","+meta2026, "", 1), f.jwt(t, nil)), nil); !res.called {
		t.Errorf("2025 on a plain route: HTTP %d %s", res.rec.Code, res.rec.Body)
	}
	res := polServe(t, h, post26(polPost(body, f.jwt(t, nil)), "ping"), nil)
	rtNotForwarded(t, res, "2026 on a plain route")
	if res.rec.Code != http.StatusBadRequest {
		t.Errorf("2026 on a plain route: HTTP %d, want 400", res.rec.Code)
	}
}

// TestRequireExtensionBatch: under require_extension every message of a
// batch must declare the extension, whatever request_proof says (a declared
// call must not carry an undeclared one through); under request_proof required a batch is refused (a
// proof covers one request).
func TestRequireExtensionBatch(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	undeclared := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	decl := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{},` + declared + `}}`
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, mode := range []string{"", "optional", "off"} {
		h := f.handler(t, func(c *setup) { c.RequestProof, c.RequireExtension = mode, true })
		for _, batch := range []string{"[" + undeclared + "]", "[" + ping + "," + undeclared + "]", "[" + decl + "," + undeclared + "]"} {
			res := polServe(t, h, polPost(batch, tok), nil)
			rtNotForwarded(t, res, "mode "+mode+" "+batch)
			if e := decodeProofRPC(t, res.rec); res.rec.Code != http.StatusOK || e.Error.Code != -32021 {
				t.Errorf("mode %q, %s: HTTP %d %s, want -32021", mode, batch, res.rec.Code, res.rec.Body)
			}
		}
		for _, batch := range []string{"[" + ping + "]", "[" + ping + "," + decl + "]"} {
			if res := polServe(t, h, polPost(batch, tok), nil); !res.called {
				t.Errorf("mode %q, %s: HTTP %d %s, want forwarded", mode, batch, res.rec.Code, res.rec.Body)
			}
		}
	}
	h := f.handler(t, func(c *setup) { c.RequestProof, c.RequireExtension = "required", true })
	batch := "[" + signed(t, f.agent, testAudience, decl) + "]"
	res := polServe(t, h, polPost(batch, tok), nil)
	rtNotForwarded(t, res, "required, batch")
	if e := decodeProofRPC(t, res.rec); res.rec.Code != http.StatusUnauthorized || e.Error.Data.Reason != "proof_missing" {
		t.Errorf("required, batch: HTTP %d %s, want 401 proof_missing", res.rec.Code, res.rec.Body)
	}
}
