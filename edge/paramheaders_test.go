package edge

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// echoSchema binds echo's region (top level) and opts.n (nested) to
// Mcp-Param-Region and Mcp-Param-N.
const echoSchema = `{"type":"object","properties":{` +
	`"region":{"type":"string","x-mcp-header":"Region"},` +
	`"opts":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}}`

// paramList is a 2026 tools/list through h at host with tok, answered by
// the upstream with echo's inputSchema schema (as JSON, or as an SSE event).
func paramList(t *testing.T, h *Handler, host, tok, schema string, sse bool) {
	t.Helper()
	r := polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+meta2026+`}}`, tok)
	r.Header.Set(mcp.HeaderProtocolVersion, mcp.Version2026)
	r.Header.Set(mcp.HeaderMethod, mcp.MethodToolsList)
	if host != "" {
		r.Host = host
	}
	answer := `{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","tools":[{"name":"echo","inputSchema":` + schema + `}]}}`
	res := polServe(t, h, r, func(w http.ResponseWriter, _ *http.Request) {
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: "+answer+"\n\n")
			return
		}
		polJSONReply(answer)(w, nil)
	})
	if res.rec.Code != http.StatusOK || !strings.Contains(res.rec.Body.String(), `"echo"`) {
		t.Fatalf("tools/list: HTTP %d %s", res.rec.Code, res.rec.Body)
	}
}

// paramCall is a 2026 tools/call of echo with arguments args and the
// Mcp-Param-* headers params ("Name: value" each).
func paramCall(host, tok, args string, params ...string) *http.Request {
	r := polPost(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":%s,%s}}`, args, meta2026), tok)
	r.Header.Set(mcp.HeaderProtocolVersion, mcp.Version2026)
	r.Header.Set(mcp.HeaderMethod, mcp.MethodToolsCall)
	r.Header.Set(mcp.HeaderName, "echo")
	for _, p := range params {
		name, value, _ := strings.Cut(p, ": ")
		r.Header.Add(name, value)
	}
	if host != "" {
		r.Host = host
	}
	return r
}

const echoResult = `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}`

// wantParamRefused asserts the edge answered 400 -32020 and forwarded
// nothing.
func wantParamRefused(t *testing.T, res polResult) {
	t.Helper()
	if res.called {
		t.Fatalf("forwarded upstream: %s", res.fwdBody)
	}
	m := decodeRPC(t, res.rec.Body.Bytes())
	if res.rec.Code != http.StatusBadRequest || m.Error == nil || m.Error.Code != mcp.CodeHeaderMismatch {
		t.Fatalf("want HTTP 400 -32020, got %d %s", res.rec.Code, res.rec.Body)
	}
}

func wantParamForwarded(t *testing.T, res polResult) {
	t.Helper()
	if !res.called || res.rec.Code != http.StatusOK {
		t.Fatalf("not forwarded: HTTP %d %s", res.rec.Code, res.rec.Body)
	}
}

func TestParamHeaders2026(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	const args = `{"region":"eu-west","opts":{"n":3}}`
	for _, tc := range []struct {
		name string
		mod  func(*setup)
		sse  bool
	}{
		{"policy/json", nil, false},
		{"policy/sse", nil, true},
		// Without a tool policy the handshake-action check reads the answers.
		{"no policy/json", func(c *setup) { c.Tools = nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := polHandler(t, f, tc.mod)
			// Not learned yet: the upstream checks.
			wantParamForwarded(t, polServe(t, h, paramCall("", tok, args), polJSONReply(echoResult)))

			paramList(t, h, "", tok, echoSchema, tc.sse)
			for _, c := range []struct {
				name    string
				args    string
				headers []string
				ok      bool
			}{
				{"matching", args, []string{"Mcp-Param-Region: eu-west", "Mcp-Param-N: 3"}, true},
				{"base64 form, lower-case name", args, []string{"mcp-param-region: " + mcp.EncodeHeaderValue(" eu-west"[1:]), "Mcp-Param-N: 3"}, true},
				{"integer spelt 3.0", args, []string{"Mcp-Param-Region: eu-west", "Mcp-Param-N: 3.0"}, false},
				{"absent argument, no header", `{"region":"eu-west"}`, []string{"Mcp-Param-Region: eu-west"}, true},
				{"null argument, no header", `{"region":"eu-west","opts":{"n":null}}`, []string{"Mcp-Param-Region: eu-west"}, true},
				{"missing", args, []string{"Mcp-Param-N: 3"}, false},
				{"mismatching", args, []string{"Mcp-Param-Region: us-east", "Mcp-Param-N: 3"}, false},
				{"mismatching nested", args, []string{"Mcp-Param-Region: eu-west", "Mcp-Param-N: 4"}, false},
				{"sent for an absent argument", `{"region":"eu-west"}`, []string{"Mcp-Param-Region: eu-west", "Mcp-Param-N: 3"}, false},
				{"given twice", args, []string{"Mcp-Param-Region: eu-west", "Mcp-Param-Region: eu-west", "Mcp-Param-N: 3"}, false},
				{"base64 of another value", args, []string{"Mcp-Param-Region: " + mcp.EncodeHeaderValue("us-east\t"), "Mcp-Param-N: 3"}, false},
				{"argument not primitive", `{"region":{"a":1},"opts":{"n":3}}`, []string{"Mcp-Param-Region: eu-west", "Mcp-Param-N: 3"}, false},
			} {
				res := polServe(t, h, paramCall("", tok, c.args, c.headers...), polJSONReply(echoResult))
				t.Run(c.name, func(t *testing.T) {
					if c.ok {
						wantParamForwarded(t, res)
					} else {
						wantParamRefused(t, res)
					}
				})
			}

			// A 2025 request carries no parameter headers: not checked.
			r := polPost(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":`+args+`}}`, tok)
			wantParamForwarded(t, polServe(t, h, r, polJSONReply(echoResult)))

			// The upstream drops the annotations: the next list forgets them.
			paramList(t, h, "", tok, `{"type":"object"}`, tc.sse)
			wantParamForwarded(t, polServe(t, h, paramCall("", tok, args), polJSONReply(echoResult)))
		})
	}
}

// TestParamHeadersPerRoute: the bindings belong to the handler (one route),
// not to the Host the client writes.
func TestParamHeadersPerRoute(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	hostTok := func(host string) string {
		return f.jwt(t, func(tm *vc.Template) {
			tm.Scopes, tm.Audience = []string{"echo:execute"}, []string{"https://" + host}
		})
	}
	const args = `{"region":"eu-west","opts":{"n":3}}`
	mismatch := []string{"Mcp-Param-Region: us-east", "Mcp-Param-N: 3"}

	t.Run("another Host is checked too", func(t *testing.T) {
		h := polHandler(t, f, nil)
		paramList(t, h, "", tok, echoSchema, false)
		for _, host := range []string{"evil.test", "localhost", "127.0.0.1."} {
			ht := hostTok(host)
			wantParamRefused(t, polServe(t, h, paramCall(host, ht, args, mismatch...), polJSONReply(echoResult)))
			wantParamForwarded(t, polServe(t, h, paramCall(host, ht, args, "Mcp-Param-Region: eu-west", "Mcp-Param-N: 3"), polJSONReply(echoResult)))
		}
		// A list fetched under another Host teaches the route as well.
		h = polHandler(t, f, nil)
		paramList(t, h, "evil.test", hostTok("evil.test"), echoSchema, false)
		wantParamRefused(t, polServe(t, h, paramCall("", tok, args, mismatch...), polJSONReply(echoResult)))
	})

	t.Run("lists under invented Hosts do not fill the store", func(t *testing.T) {
		h := polHandler(t, f, nil)
		for i := range 5 {
			host := fmt.Sprintf("fill%d.test", i)
			paramList(t, h, host, hostTok(host), echoSchema, false)
		}
		wantParamRefused(t, polServe(t, h, paramCall("", tok, args, mismatch...), polJSONReply(echoResult)))
	})

	t.Run("a 2025 list does not forget", func(t *testing.T) {
		h := polHandler(t, f, nil)
		paramList(t, h, "", tok, echoSchema, false)
		paramList2025(t, h, tok, `{"type":"object"}`)
		wantParamRefused(t, polServe(t, h, paramCall("", tok, args, mismatch...), polJSONReply(echoResult)))
		// Nor does a 2025 list teach.
		h = polHandler(t, f, nil)
		paramList2025(t, h, tok, echoSchema)
		wantParamForwarded(t, polServe(t, h, paramCall("", tok, args, mismatch...), polJSONReply(echoResult)))
		// A 2026 list without them is the upstream dropping them.
		paramList(t, h, "", tok, echoSchema, false)
		paramList(t, h, "", tok, `{"type":"object"}`, false)
		wantParamForwarded(t, polServe(t, h, paramCall("", tok, args), polJSONReply(echoResult)))
	})

	t.Run("a list with the 2026 header but no _meta version does not forget", func(t *testing.T) {
		h := polHandler(t, f, nil)
		paramList(t, h, "", tok, echoSchema, false)
		// The upstream reads the era from the body and answers as to a
		// 2025 client: no x-mcp-header.
		r := polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, tok)
		r.Header.Set(mcp.HeaderProtocolVersion, mcp.Version2026)
		r.Header.Set(mcp.HeaderMethod, mcp.MethodToolsList)
		answer := `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}`
		if res := polServe(t, h, r, polJSONReply(answer)); res.rec.Code != http.StatusOK {
			t.Fatalf("tools/list: HTTP %d %s", res.rec.Code, res.rec.Body)
		}
		wantParamRefused(t, polServe(t, h, paramCall("", tok, args, mismatch...), polJSONReply(echoResult)))
		// Nor does such a list teach.
		h = polHandler(t, f, nil)
		answer = `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo","inputSchema":` + echoSchema + `}]}}`
		r = polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, tok)
		r.Header.Set(mcp.HeaderProtocolVersion, mcp.Version2026)
		r.Header.Set(mcp.HeaderMethod, mcp.MethodToolsList)
		_ = polServe(t, h, r, polJSONReply(answer))
		wantParamForwarded(t, polServe(t, h, paramCall("", tok, args, mismatch...), polJSONReply(echoResult)))
	})

	t.Run("invalid annotations are forgotten", func(t *testing.T) {
		// Two annotations naming one header: clients drop the tool; the
		// edge forgets it and leaves the call to the upstream.
		h := polHandler(t, f, nil)
		paramList(t, h, "", tok, echoSchema, false)
		const invalid = `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"R"},"b":{"type":"string","x-mcp-header":"r"}}}`
		paramList(t, h, "", tok, invalid, false)
		wantParamForwarded(t, polServe(t, h, paramCall("", tok, args), polJSONReply(echoResult)))
	})
}

// paramList2025 is paramList for a 2025 client (no protocol header, no
// _meta version).
func paramList2025(t *testing.T, h *Handler, tok, schema string) {
	t.Helper()
	r := polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, tok)
	answer := `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo","inputSchema":` + schema + `}]}}`
	res := polServe(t, h, r, polJSONReply(answer))
	if res.rec.Code != http.StatusOK || !strings.Contains(res.rec.Body.String(), `"echo"`) {
		t.Fatalf("tools/list: HTTP %d %s", res.rec.Code, res.rec.Body)
	}
}

// TestParamHeadersInvalidType: one annotation on a number or ["string"]
// property makes the tool invalid but does not switch off the checks of
// its other headers; a number header, when sent, is compared by value.
func TestParamHeadersInvalidType(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	const withNumber = `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},` +
		`"score":{"type":"number","x-mcp-header":"Score"}}}`
	const withArray = `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},` +
		`"tag":{"type":["string"],"x-mcp-header":"Tag"}}}`
	for _, tc := range []struct {
		name, schema, args string
		headers            []string
		ok                 bool
	}{
		{"number: region mismatch", withNumber, `{"region":"eu","score":3.5}`, []string{"Mcp-Param-Region: us", "Mcp-Param-Score: 3.5"}, false},
		{"number: match", withNumber, `{"region":"eu","score":3.5}`, []string{"Mcp-Param-Region: eu", "Mcp-Param-Score: 3.5"}, true},
		{"number: score header left out", withNumber, `{"region":"eu","score":3.5}`, []string{"Mcp-Param-Region: eu"}, true},
		{"number: score mismatch", withNumber, `{"region":"eu","score":3.5}`, []string{"Mcp-Param-Region: eu", "Mcp-Param-Score: 9"}, false},
		{"array type: region mismatch", withArray, `{"region":"eu","tag":"x"}`, []string{"Mcp-Param-Region: us", "Mcp-Param-Tag: x"}, false},
		{"array type: tag not checked", withArray, `{"region":"eu","tag":"x"}`, []string{"Mcp-Param-Region: eu", "Mcp-Param-Tag: y"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := polHandler(t, f, nil)
			paramList(t, h, "", tok, tc.schema, false)
			res := polServe(t, h, paramCall("", tok, tc.args, tc.headers...), polJSONReply(echoResult))
			if tc.ok {
				wantParamForwarded(t, res)
			} else {
				wantParamRefused(t, res)
			}
		})
	}
}
