package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
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
		h := polHandler(t, f, func(c *setup) {
			if !withPolicy {
				c.Tools = nil
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

// list2026 is a 2026 upstream's tools/list answer: every tool, cacheable by
// anyone for a minute.
func list2026(id int) string {
	var tools []string
	for _, n := range polAllTools {
		tools = append(tools, fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object"}}`, n))
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"tools":[%s],"ttlMs":60000,"cacheScope":"public","resultType":"complete"}}`, id, strings.Join(tools, ","))
}

func listRequest2026(base, tok string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+meta2026+`}}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set(mcp.HeaderProtocolVersion, mcp.Version2026)
	r.Header.Set(mcp.HeaderMethod, "tools/list")
	return r
}

// listShape is what a client reads of a list result.
type listShape struct {
	Result struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		TTLMs      *int   `json:"ttlMs"`
		CacheScope string `json:"cacheScope"`
	} `json:"result"`
}

func TestToolsList2026Private(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	check := func(t *testing.T, body string) {
		t.Helper()
		var l listShape
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		var names []string
		for _, tl := range l.Result.Tools {
			names = append(names, tl.Name)
		}
		if !slices.Equal(names, []string{"echo", "public"}) {
			t.Errorf("tools %v, want [echo public]", names)
		}
		if l.Result.CacheScope != "private" || l.Result.TTLMs == nil || *l.Result.TTLMs != 60000 {
			t.Errorf("cacheScope %q ttlMs %v, want private and 60000: %s", l.Result.CacheScope, l.Result.TTLMs, body)
		}
	}
	t.Run("JSON", func(t *testing.T) {
		r := listRequest2026("http://"+testHost, tok)
		res := polServe(t, h, r, polJSONReply(list2026(2)))
		check(t, res.rec.Body.String())
	})
	t.Run("SSE", func(t *testing.T) {
		progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
		events := polStream(t, h, func(base string) *http.Request { return listRequest2026(base, tok) }, progress, list2026(2))
		if events[0] != progress {
			t.Errorf("first event %s", events[0])
		}
		check(t, events[1])
	})
}

func TestDenied2026HasResultType(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	for _, consent := range []string{polConsent, ""} {
		h := polHandler(t, f, func(c *setup) { c.ConsentURL = consent })
		for _, tool := range []string{"files_write", "nope", "vp_only"} {
			res := polServe(t, h, call2026(3, tool, tok, "tools/call", tool, ""), nil)
			var m struct {
				Result map[string]any `json:"result"`
			}
			if res.called || json.Unmarshal(res.rec.Body.Bytes(), &m) != nil || m.Result["resultType"] != "complete" || m.Result["isError"] != true {
				t.Errorf("consent %q tool %s: called %v, %s", consent, tool, res.called, res.rec.Body)
			}
			// The same refusal in the 2025 era has no resultType.
			res = polServe(t, h, polPost(polCall(3, tool), tok), nil)
			if strings.Contains(res.rec.Body.String(), "resultType") {
				t.Errorf("2025 refusal carries resultType: %s", res.rec.Body)
			}
		}
	}
}

const urlCaps = `,"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}`

// inputRequired is what a 2026 client reads of an input-required result.
type inputRequired struct {
	Result struct {
		ResultType    string `json:"resultType"`
		InputRequests map[string]struct {
			Method string `json:"method"`
			Params struct {
				Mode          string `json:"mode"`
				URL           string `json:"url"`
				ElicitationID string `json:"elicitationId"`
				Message       string `json:"message"`
			} `json:"params"`
		} `json:"inputRequests"`
		RequestState string `json:"requestState"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// retry2026 is a 2026 retry of tool carrying requestState.
func retry2026(id int, tool, tok, state string) *http.Request {
	return call2026(id, tool, tok, "tools/call", tool, urlCaps+`},"requestState":`+strconv.Quote(state)+`,"x":{`)
}

// edgeStatePrefix begins every requestState the edge seals.
const edgeStatePrefix = "mcpi1."

// promptState is the requestState of the 2026 consent prompt h answers a
// call of files_write with, made with tok (which lacks files:write).
func promptState(t *testing.T, h *Handler, tok string) string {
	t.Helper()
	res := polServe(t, h, call2026(3, "files_write", tok, "tools/call", "files_write", urlCaps), nil)
	var ir inputRequired
	if res.called || json.Unmarshal(res.rec.Body.Bytes(), &ir) != nil || !strings.HasPrefix(ir.Result.RequestState, edgeStatePrefix) {
		t.Fatalf("called %v, want a consent prompt with a requestState: %s", res.called, res.rec.Body)
	}
	return ir.Result.RequestState
}

func TestConsentPrompt2026(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })

	res := polServe(t, h, call2026(3, "files_write", tok, "tools/call", "files_write", urlCaps), nil)
	var ir inputRequired
	if res.called || json.Unmarshal(res.rec.Body.Bytes(), &ir) != nil || ir.Result.ResultType != "input_required" {
		t.Fatalf("called %v, want an input_required result: %s", res.called, res.rec.Body)
	}
	in, ok := ir.Result.InputRequests[mcp.ConsentInputID]
	if !ok || len(ir.Result.InputRequests) != 1 || in.Method != "elicitation/create" || in.Params.Mode != "url" {
		t.Fatalf("inputRequests %+v", ir.Result.InputRequests)
	}
	u, err := url.Parse(in.Params.URL)
	if err != nil || u.Host != "consent.example.com" || u.Query().Get("tool") != "files_write" ||
		u.Query().Get("scopes") != "files:write" || u.Query().Get("agent_did") != f.agent.did ||
		u.Query().Get("resume_token") == "" || u.Query().Get("resume_token") != in.Params.ElicitationID {
		t.Fatalf("elicitation url %q (%v), id %q", in.Params.URL, err, in.Params.ElicitationID)
	}
	state := ir.Result.RequestState
	if !strings.HasPrefix(state, edgeStatePrefix) || strings.Contains(state, "files_write") || strings.Contains(state, f.agent.did) {
		t.Fatalf("requestState %q is not sealed", state)
	}

	t.Run("retry still without the scope is asked again", func(t *testing.T) {
		res := polServe(t, h, retry2026(4, "files_write", tok, state), nil)
		var again inputRequired
		if res.called || json.Unmarshal(res.rec.Body.Bytes(), &again) != nil || again.Result.ResultType != "input_required" {
			t.Fatalf("called %v: %s", res.called, res.rec.Body)
		}
	})
	t.Run("retry with the scope granted goes upstream", func(t *testing.T) {
		granted := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"files:write"} })
		if res := polServe(t, h, retry2026(4, "files_write", granted, state), nil); !res.called {
			t.Fatalf("not forwarded: %s", res.rec.Body)
		}
	})
	refused := func(t *testing.T, r *http.Request, want string) {
		t.Helper()
		res := polServe(t, h, r, nil)
		var m inputRequired
		if res.called || json.Unmarshal(res.rec.Body.Bytes(), &m) != nil || m.Error == nil || m.Error.Code != mcp.CodeInvalidParams ||
			!strings.Contains(m.Error.Message, want) {
			t.Fatalf("called %v, want error -32602 saying %q: %s", res.called, want, res.rec.Body)
		}
	}
	t.Run("state for another tool", func(t *testing.T) {
		refused(t, retry2026(5, "files_read", f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"files:read"} }), state), "another agent or for another tool")
	})
	t.Run("state of another agent", func(t *testing.T) {
		tok2 := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"files:write"}; tm.AgentDID = "did:key:z6MkOtherAgent" })
		refused(t, retry2026(5, "files_write", tok2, state), "another agent")
	})
	t.Run("forged state", func(t *testing.T) {
		refused(t, retry2026(6, "files_write", tok, edgeStatePrefix+"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), "not one this edge issued")
		refused(t, retry2026(6, "files_write", tok, state[:len(state)-2]+"xx"), "not one this edge issued")
	})
	t.Run("state sealed by another handler", func(t *testing.T) {
		other := polHandler(t, f, nil)
		refused(t, retry2026(6, "files_write", tok, promptState(t, other, tok)), "not one this edge issued")
	})
	t.Run("replicas sharing storage open each other's states", func(t *testing.T) {
		st := fileStorage(t)
		a := polHandler(t, f, func(c *setup) { c.use(WithKeyStorage(st)) })
		b := polHandler(t, f, func(c *setup) { c.use(WithKeyStorage(st)) })
		granted := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"files:write"} })
		if res := polServe(t, b, retry2026(6, "files_write", granted, promptState(t, a, tok)), nil); !res.called {
			t.Fatalf("a replica's state refused: %s", res.rec.Body)
		}
		refused(t, retry2026(6, "files_write", tok, promptState(t, a, tok)), "not one this edge issued")
	})
	t.Run("the upstream's own state passes to the policy", func(t *testing.T) {
		granted := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"files:write"} })
		if res := polServe(t, h, retry2026(8, "files_write", granted, "upstream-state"), nil); !res.called {
			t.Fatalf("not forwarded: %s", res.rec.Body)
		}
	})
	t.Run("without the URL capability: the tool result", func(t *testing.T) {
		res := polServe(t, h, call2026(9, "files_write", tok, "tools/call", "files_write", `,"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}`), nil)
		m := decodeRPC(t, res.rec.Body.Bytes())
		if m.Result == nil || !m.Result.IsError || m.handshakeAction() == nil || !strings.Contains(res.rec.Body.String(), `"resultType":"complete"`) {
			t.Fatalf("want the isError consent result with resultType: %s", res.rec.Body)
		}
	})
	t.Run("2025 client declaring URL elicitation: the tool result", func(t *testing.T) {
		res := polServe(t, h, polPost(polCall(9, "files_write"), tok), nil)
		if m := decodeRPC(t, res.rec.Body.Bytes()); m.Result == nil || !m.Result.IsError || strings.Contains(res.rec.Body.String(), "resultType") {
			t.Fatalf("2025 answer changed: %s", res.rec.Body)
		}
	})
}

func TestElicitationGuardEdge(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	ir := func(u string) string {
		return `{"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create","params":{"mode":"url","message":"m","url":"` + u + `","elicitationId":"e"}}},"requestState":"up"}}`
	}
	t.Run("2026 foreign host blocked", func(t *testing.T) {
		res := polServe(t, h, call2026(3, "echo", tok, "tools/call", "echo", ""), polJSONReply(ir("https://evil.example.net/pay")))
		b := res.rec.Body.String()
		if strings.Contains(b, "evil.example.net/pay") || !strings.Contains(b, `"resultType":"complete"`) || !strings.Contains(b, "foreign_host") {
			t.Fatalf("foreign elicitation passed: %s", b)
		}
	})
	t.Run("2026 own host passed", func(t *testing.T) {
		own := "https://login." + strings.Split(testHost, ":")[0] + "/a"
		res := polServe(t, h, call2026(3, "echo", tok, "tools/call", "echo", ""), polJSONReply(ir(own)))
		var m inputRequired
		if json.Unmarshal(res.rec.Body.Bytes(), &m) != nil || m.Result.ResultType != "input_required" || m.Result.InputRequests["k"].Params.URL == "" ||
			!strings.HasPrefix(m.Result.InputRequests["k"].Params.URL, own) {
			t.Fatalf("own-host elicitation not passed: %s", res.rec.Body)
		}
	})
	t.Run("2025 elicitation/create on the SSE stream", func(t *testing.T) {
		post := func(base string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(polCall(2, "echo")))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set("Authorization", "Bearer "+tok)
			return r
		}
		elicit := `{"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":{"mode":"url","message":"m","url":"https://evil.example.net/x","elicitationId":"e"}}`
		events := polStream(t, h, post, elicit, `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)
		if strings.Contains(events[0], "evil.example.net/x") || strings.Contains(events[0], "elicitation/create") || !strings.Contains(events[0], "notifications/message") {
			t.Fatalf("foreign elicitation request passed: %s", events[0])
		}
	})
}

// TestListenStream2026: a subscriptions/listen stream streams (each event
// reaches the client while the upstream is still writing), and a tool list
// on it is filtered and marked private.
func TestListenStream2026(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	listen := func(base string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{`+meta2026+`}}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set(mcp.HeaderProtocolVersion, mcp.Version2026)
		r.Header.Set(mcp.HeaderMethod, "subscriptions/listen")
		return r
	}
	changed := `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`
	events := polStream(t, h, listen, changed, list2026(5))
	if events[0] != changed {
		t.Errorf("first event %s", events[0])
	}
	var l listShape
	if err := json.Unmarshal([]byte(events[1]), &l); err != nil || len(l.Result.Tools) != 2 || l.Result.CacheScope != "private" {
		t.Errorf("tool list on the listen stream not filtered: %s", events[1])
	}
}

// TestFraming2026HeaderCarriersOnly: with no body carrier the carriers do
// not read the body; the framing step reads it once and the policy decides
// on the same bytes, which reach the upstream unchanged.
func TestFraming2026HeaderCarriersOnly(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, func(c *setup) { c.Carriers = []string{"authorization"} })
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	if res := polServe(t, h, call2026(1, "admin_delete", tok, "tools/call", "echo", ""), nil); res.called || res.rec.Code != http.StatusBadRequest {
		t.Fatalf("mismatch: called %v HTTP %d %s", res.called, res.rec.Code, res.rec.Body)
	}
	res := polServe(t, h, call2026(2, "files_write", tok, "tools/call", "files_write", ""), nil)
	if m := decodeRPC(t, res.rec.Body.Bytes()); res.called || m.Result == nil || !m.Result.IsError {
		t.Fatalf("denied call: called %v %s", res.called, res.rec.Body)
	}
	res = polServe(t, h, call2026(3, "echo", tok, "tools/call", "echo", ""), nil)
	if !res.called || string(res.fwdBody) != body2026(3, "echo", "") {
		t.Fatalf("allowed call: called %v forwarded %s", res.called, res.fwdBody)
	}
}
