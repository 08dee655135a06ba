//go:build redteam

// Red-team tests that FAIL on the current code: each one demonstrates a
// bypass or a broken guarantee. They are behind the redteam build tag so the
// branch stays green; run them with
//
//	go test -race -tags redteam ./caddymodule/ -run Redteam
package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestRedteamToolsListDuplicateIDs: RequestMethods (mcp/jsonrpc.go) maps
// each request id to ONE method, the last one in the batch. A batch that
// sends tools/list and ping under the same id makes the edge believe the
// id answers ping, and FilterResponseBody (mcp/toolslist.go) leaves a
// response to a known non-tools/list id alone: the full tool list goes to
// the caller, here an anonymous one. IDKey also merges 1 and 1.0.
func TestRedteamToolsListDuplicateIDs(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	for _, tc := range []struct{ name, body string }{
		{"same id", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`},
		{"1 and 1.0", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":1.0,"method":"ping"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An upstream answers each request with the id it carried (the
			// go-sdk echoes 1.0 as 1).
			reply := func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, "[%s,%s]", polToolsListResult(1), `{"jsonrpc":"2.0","id":1,"result":{}}`)
			}
			res := polServe(t, h, polPost(tc.body, ""), reply)
			if !res.called {
				t.Fatalf("precondition: anonymous batch of tools/list and ping not admitted: %d %s", res.rec.Code, res.rec.Body)
			}
			var msgs []rpcMsg
			if err := json.Unmarshal(res.rec.Body.Bytes(), &msgs); err != nil {
				t.Fatalf("answer %s: %v", res.rec.Body, err)
			}
			var listed []string
			for _, m := range msgs {
				listed = append(listed, m.toolNames()...)
			}
			if slices.ContainsFunc(listed, func(n string) bool { return n != "public" }) {
				t.Fatalf("BYPASS: anonymous caller got the unfiltered tool list %v", listed)
			}
		})
	}
}

// TestRedteamPolicyOnlyForUppercasePOST: enforcePolicy (policy.go) applies
// the per-tool policy when r.Method == "POST" only. Go's server keeps the
// method as sent, and Caddy's reverse_proxy forwards it as is, so a
// verified agent's denied tools/call sent as "post" (or PUT, PATCH) is
// forwarded without the tool check. The Go SDK and Node refuse such
// methods, but a server that routes methods case-insensitively, or takes
// JSON-RPC over any method, runs the tool.
func TestRedteamPolicyOnlyForUppercasePOST(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	for _, m := range []string{"post", "PUT", "PATCH"} {
		r := polPost(polCall(1, "files_write"), tok)
		r.Method = m
		if res := polServe(t, h, r, nil); res.called {
			t.Errorf("WEAK: denied tools/call sent with method %q forwarded to the upstream", m)
		}
	}
}
