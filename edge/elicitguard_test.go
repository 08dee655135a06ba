package edge

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The URL-elicitation guard at the edge: every answer the edge checks is
// checked for URL elicitations, whatever the request method (a server may
// ask for input in the answer to any request), and a case-variant spelling
// that a case-insensitive client reads never gets one past it.

const jsURL = "javascript:alert(1)"

// irResult is a 2026 input-required result for id whose URL elicitation
// opens u.
func irResult(id, u string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"mode":"url","message":"m","url":"` +
		u + `","elicitationId":"e"}}},"requestState":"s"}}`
}

// elicitRequest is a 2025 server-to-client elicitation/create opening u.
func elicitRequest(u string) string {
	return `{"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":{"mode":"url","message":"m","url":"` + u + `","elicitationId":"e"}}`
}

// request2026 is a 2026 POST of method with params (plus the version
// _meta), with the framing headers a 2026 client sends.
func request2026(base, tok, method, name, params string) *http.Request {
	body := `{"jsonrpc":"2.0","id":4,"method":"` + method + `","params":{` + params
	if params != "" {
		body += ","
	}
	body += meta2026 + `}}`
	r, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set(mcp.HeaderProtocolVersion, mcp.Version2026)
	r.Header.Set(mcp.HeaderMethod, method)
	if name != "" {
		r.Header.Set(mcp.HeaderName, name)
	}
	return r
}

// guardHandlers are the routes the guard must hold on: with a tool policy,
// and with handshake_actions (enforce by default) alone.
func guardHandlers(t *testing.T, f fixture) map[string]*Handler {
	return map[string]*Handler{
		"tool policy": polHandler(t, f, nil),
		"no policy":   f.handler(t, nil),
	}
}

func TestElicitationGuardEveryMethod2026(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	for hname, h := range guardHandlers(t, f) {
		for _, tt := range []struct{ method, name, params string }{
			{"prompts/get", "p", `"name":"p"`},
			{"resources/read", "file:///a", `"uri":"file:///a"`},
		} {
			t.Run(hname+" "+tt.method, func(t *testing.T) {
				res := polServe(t, h, request2026("http://"+testHost, tok, tt.method, tt.name, tt.params), polJSONReply(irResult("4", jsURL)))
				if !res.called {
					t.Fatalf("not forwarded: %d %s", res.rec.Code, res.rec.Body)
				}
				var m struct {
					ID     json.RawMessage     `json:"id"`
					Result json.RawMessage     `json:"result"`
					Error  *struct{ Code int } `json:"error"`
				}
				b := res.rec.Body.String()
				if err := json.Unmarshal(res.rec.Body.Bytes(), &m); err != nil || strings.Contains(b, "javascript:") ||
					string(m.ID) != "4" || m.Result != nil || m.Error == nil || m.Error.Code != mcp.CodeInternalError {
					t.Fatalf("javascript: elicitation passed or answer malformed: %s", b)
				}
			})
		}
	}
}

func TestElicitationGuardStreams(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	post2025 := func(base string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"p"}}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Authorization", "Bearer "+tok)
		return r
	}
	for hname, h := range guardHandlers(t, f) {
		for _, tt := range []struct {
			name string
			req  func(base string) *http.Request
		}{
			{"2025 prompts/get", post2025},
			{"2026 ping", func(base string) *http.Request { return request2026(base, tok, "ping", "", "") }},
			{"2026 subscriptions/listen", func(base string) *http.Request {
				return request2026(base, tok, "subscriptions/listen", "", "")
			}},
		} {
			t.Run(hname+" "+tt.name, func(t *testing.T) {
				events := polStream(t, h, tt.req, elicitRequest(jsURL), `{"jsonrpc":"2.0","id":4,"result":{"messages":[]}}`)
				if strings.Contains(events[0], "javascript:") || strings.Contains(events[0], "elicitation/create") || !strings.Contains(events[0], "notifications/message") {
					t.Fatalf("javascript: elicitation request passed: %s", events[0])
				}
				if !strings.Contains(events[1], `"messages":[]`) {
					t.Errorf("the answer after it changed: %s", events[1])
				}
			})
		}
	}
}

// TestElicitationGuardCaseVariants: members a case-insensitive client
// reads as inputRequests, method or params are refused, in tool results and
// in the answers to other requests, and on 2025 streams.
func TestElicitationGuardCaseVariants(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	const bad = `{"mode":"url","message":"m","url":"` + jsURL + `"}`
	wrap := func(irs string) string {
		return `{"jsonrpc":"2.0","id":4,"result":{"resultType":"input_required","inputRequests":` + irs + `}}`
	}
	answers := map[string]string{
		"Method twin":   wrap(`{"a":{"method":"x","Method":"elicitation/create","params":` + bad + `}}`),
		"Params":        wrap(`{"a":{"method":"elicitation/create","Params":` + bad + `}}`),
		"InputRequests": `{"jsonrpc":"2.0","id":4,"result":{"resultType":"input_required","InputRequests":{"a":{"method":"elicitation/create","params":` + bad + `}}}}`,
		"2025 Method":   `{"jsonrpc":"2.0","id":"s","method":"x","Method":"elicitation/create","params":` + bad + `}`,
	}
	for hname, h := range guardHandlers(t, f) {
		for aname, answer := range answers {
			for _, req := range []struct {
				name string
				r    func() *http.Request
			}{
				{"tools/call", func() *http.Request { return call2026(4, "echo", tok, "tools/call", "echo", "") }},
				{"prompts/get", func() *http.Request {
					return request2026("http://"+testHost, tok, "prompts/get", "p", `"name":"p"`)
				}},
			} {
				t.Run(hname+" "+aname+" "+req.name, func(t *testing.T) {
					res := polServe(t, h, req.r(), polJSONReply(answer))
					if !res.called {
						t.Fatalf("not forwarded: %d %s", res.rec.Code, res.rec.Body)
					}
					if b := res.rec.Body.String(); strings.Contains(b, "javascript:") || !json.Valid(res.rec.Body.Bytes()) {
						t.Fatalf("case-variant elicitation passed: %s", b)
					}
				})
			}
		}
	}
}

// TestElicitationGuardObserve: observe mode reports but passes the answer to
// a prompts/get unchanged, and a plain answer passes untouched in enforce.
func TestElicitationGuardObserve(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	h := f.handler(t, func(c *setup) { c.HandshakeActions = "observe" })
	answer := irResult("4", jsURL)
	res := polServe(t, h, request2026("http://"+testHost, tok, "prompts/get", "p", `"name":"p"`), polJSONReply(answer))
	if res.rec.Body.String() != answer {
		t.Errorf("observe changed the answer: %s", res.rec.Body)
	}
	plain := `{"jsonrpc":"2.0","id":4,"result":{"messages":[{"role":"user","content":{"type":"text","text":"see https://x.example"}}]}}`
	res = polServe(t, f.handler(t, nil), request2026("http://"+testHost, tok, "prompts/get", "p", `"name":"p"`), polJSONReply(plain))
	if res.rec.Body.String() != plain {
		t.Errorf("a plain answer changed: %s", res.rec.Body)
	}
}
