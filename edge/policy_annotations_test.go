package edge

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// annTools are the tools the fake upstream of the annotation tests lists,
// with their annotations, and the class each should get.
var annTools = []struct{ name, annotations string }{
	{"lookup", `{"readOnlyHint":true}`},                                          // read_only (destructiveHint ignored)
	{"search", `{"title":"Search","readOnlyHint":true,"destructiveHint":false}`}, // read_only
	{"wipe", `{"destructiveHint":true}`},                                         // destructive
	{"bare", ``},                                                                 // no annotations: destructive
	{"nullish", `null`},                                                          // destructive
	{"append", `{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":true}`}, // other
	{"both", `{"readOnlyHint":true,"destructiveHint":true}`},                           // contradictory: destructive
	{"files_write", `{"readOnlyHint":true}`},                                           // explicit rule wins
}

func annToolsListResult(id int) string {
	var tools []string
	for _, tl := range annTools {
		a := ""
		if tl.annotations != "" {
			a = `,"annotations":` + tl.annotations
		}
		tools = append(tools, fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object"}%s}`, tl.name, a))
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"tools":[%s]}}`, id, strings.Join(tools, ","))
}

// annListReply answers a tools/list like an upstream: JSON, in two writes.
func annListReply(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	out := annToolsListResult(2)
	_, _ = io.WriteString(w, out[:40])
	_, _ = io.WriteString(w, out[40:])
}

func annHandler(t testing.TB, f fixture, mod func(*setup)) *Handler {
	return f.handler(t, func(c *setup) {
		c.Tools = []ToolPolicy{{Name: "files_write", Scopes: []string{"admin:write"}}}
		c.ToolAnnotationsPolicy = &ToolAnnotationsPolicy{
			ReadOnly:    []string{"ro:read"},
			Destructive: []string{"rw:write"},
			Other:       []string{"misc:other"},
		}
		c.ConsentURL = polConsent
		if mod != nil {
			mod(c)
		}
	})
}

// annList lists the tools through h with tok and returns the names kept.
func annList(t *testing.T, h *Handler, tok string) []string {
	t.Helper()
	res := polServe(t, h, polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, tok), annListReply)
	if res.rec.Code != http.StatusOK {
		t.Fatalf("tools/list: HTTP %d %s", res.rec.Code, res.rec.Body)
	}
	return decodeRPC(t, res.rec.Body.Bytes()).toolNames()
}

// annCall calls tool through h with tok: whether it reached the upstream,
// and the edge's answer when it did not.
func annCall(t *testing.T, h *Handler, tok, tool string) (forwarded bool, denial rpcMsg) {
	t.Helper()
	res := polServe(t, h, polPost(polCall(1, tool), tok), polJSONReply(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`))
	if !res.called {
		denial = decodeRPC(t, res.rec.Body.Bytes())
	}
	return res.called, denial
}

func TestToolAnnotationsPolicy(t *testing.T) {
	f := newFixture(t)
	h := annHandler(t, f, nil)
	tokFor := func(scopes ...string) string {
		return f.jwt(t, func(tm *vc.Template) { tm.Scopes = scopes })
	}
	ro, rw, misc := tokFor("ro:read"), tokFor("rw:write"), tokFor("misc:other")
	all := tokFor("ro:read", "rw:write", "misc:other", "admin:write")

	// Before any tools/list went through, nothing is known: tool_default
	// (deny) decides, not the most permissive class.
	if fwd, m := annCall(t, h, all, "lookup"); fwd || m.Result == nil || m.Result.StructuredContent["error"] != "tool_not_allowed" {
		t.Fatalf("unseen tool: forwarded=%t %+v", fwd, m.Result)
	}

	// The list is filtered by class, and learning happens before filtering
	// the same answer.
	if got, want := annList(t, h, ro), []string{"lookup", "search"}; !slices.Equal(got, want) {
		t.Errorf("tools/list with ro:read = %v, want %v", got, want)
	}

	t.Run("read_only", func(t *testing.T) {
		for _, tool := range []string{"lookup", "search"} {
			if fwd, _ := annCall(t, h, ro, tool); !fwd {
				t.Errorf("%s denied with ro:read", tool)
			}
			fwd, m := annCall(t, h, rw, tool)
			if fwd {
				t.Fatalf("%s allowed without ro:read", tool)
			}
			if a := m.handshakeAction(); a["_action"] != "auth_required" || !strings.Contains(a["authUrl"].(string), "scopes=ro%3Aread") {
				t.Errorf("%s: handshakeAction %v", tool, a)
			}
		}
	})
	t.Run("destructive", func(t *testing.T) {
		for _, tool := range []string{"wipe", "bare", "nullish", "both"} {
			if fwd, _ := annCall(t, h, rw, tool); !fwd {
				t.Errorf("%s denied with rw:write", tool)
			}
			fwd, m := annCall(t, h, ro, tool)
			if fwd {
				t.Fatalf("%s allowed with ro:read only", tool)
			}
			if a := m.handshakeAction(); a["_action"] != "auth_required" || !strings.Contains(a["authUrl"].(string), "scopes=rw%3Awrite") {
				t.Errorf("%s: handshakeAction %v", tool, a)
			}
		}
	})
	t.Run("other", func(t *testing.T) {
		if fwd, _ := annCall(t, h, misc, "append"); !fwd {
			t.Error("append denied with misc:other")
		}
		if fwd, _ := annCall(t, h, rw, "append"); fwd {
			t.Error("append allowed with rw:write: it is not destructive")
		}
	})
	t.Run("explicit rule wins", func(t *testing.T) {
		if fwd, _ := annCall(t, h, ro, "files_write"); fwd {
			t.Error("files_write allowed by its read-only annotation despite its rule")
		}
		if fwd, _ := annCall(t, h, tokFor("admin:write"), "files_write"); !fwd {
			t.Error("files_write denied with its rule's scope")
		}
	})
	t.Run("ambiguous and unseen get tool_default", func(t *testing.T) {
		// A hint given twice: the edge withholds the whole list (a tool
		// list is read strictly), and the tool's calls get
		// tool_default.
		odd := `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"odd","annotations":{"readOnlyHint":true,"readOnlyHint":false}}]}}`
		res := polServe(t, h, polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, all), polJSONReply(odd))
		if m := decodeRPC(t, res.rec.Body.Bytes()); m.Error == nil || m.Error.Code != mcp.CodeInternalError {
			t.Errorf("ambiguous annotations: %s, want -32603", res.rec.Body)
		}
		for _, tool := range []string{"odd", "never_listed"} {
			fwd, m := annCall(t, h, all, tool)
			if fwd || m.Result == nil || m.Result.StructuredContent["error"] != "tool_not_allowed" {
				t.Errorf("%s: forwarded=%t %+v", tool, fwd, m.Result)
			}
		}
		ha := annHandler(t, f, func(c *setup) { c.ToolDefault = "allow" })
		annList(t, ha, ro)
		if fwd, _ := annCall(t, ha, tokFor(), "never_listed"); !fwd {
			t.Error("unseen tool denied under tool_default allow")
		}
		if fwd, _ := annCall(t, ha, tokFor(), "lookup"); fwd {
			t.Error("a learned tool got tool_default allow instead of its class")
		}
	})

	// tools/list shows exactly what the same caller may call.
	t.Run("list agrees with calls", func(t *testing.T) {
		for _, tok := range []string{ro, rw, misc, all, tokFor()} {
			listed := annList(t, h, tok)
			for _, tl := range append(slices.Clone(annTools), struct{ name, annotations string }{"never_listed", ""}) {
				fwd, _ := annCall(t, h, tok, tl.name)
				if fwd != slices.Contains(listed, tl.name) {
					t.Errorf("%s: callable=%t, listed in %v", tl.name, fwd, listed)
				}
			}
		}
	})

	t.Run("annotations change", func(t *testing.T) {
		h := annHandler(t, f, nil)
		reply := func(ann string) func(w http.ResponseWriter, r *http.Request) {
			return func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"lookup","annotations":%s}]}}`, ann)
			}
		}
		polServe(t, h, polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, ro), reply(`{"readOnlyHint":true}`))
		if fwd, _ := annCall(t, h, ro, "lookup"); !fwd {
			t.Fatal("read-only lookup denied")
		}
		polServe(t, h, polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, ro), reply(`{}`))
		if fwd, _ := annCall(t, h, ro, "lookup"); fwd {
			t.Error("lookup still read-only after the upstream dropped the hint")
		}
	})
}

// TestToolAnnotationsPolicySSE: a tools/list answered over SSE is learned
// before the filter reads the same event.
func TestToolAnnotationsPolicySSE(t *testing.T) {
	f := newFixture(t)
	h := annHandler(t, f, nil)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"rw:write"} })
	post := func(base string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Authorization", "Bearer "+tok)
		return r
	}
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	events := polStream(t, h, post, progress, annToolsListResult(2))
	if got, want := decodeRPC(t, []byte(events[1])).toolNames(), []string{"wipe", "bare", "nullish", "both"}; !slices.Equal(got, want) {
		t.Errorf("tools/list over SSE = %v, want %v", got, want)
	}
	if fwd, _ := annCall(t, h, tok, "wipe"); !fwd {
		t.Error("wipe denied after an SSE tools/list")
	}
}

// TestToolAnnotationsNotLearned: only answers to tools/list requests the
// edge forwarded teach classes; unreadable ones teach nothing.
func TestToolAnnotationsNotLearned(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"ro:read", "rw:write"} })
	listAnswer := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"lookup","annotations":{"readOnlyHint":true}}]}}`
	for name, tc := range map[string]struct {
		body  string
		reply func(w http.ResponseWriter, r *http.Request)
	}{
		"tools/call result shaped like a list": {polCall(1, "files_write"), polJSONReply(listAnswer)},
		"compressed": {`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = io.WriteString(w, listAnswer)
		}},
		"too large": {`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, polJSONReply(strings.Replace(listAnswer,
			`"annotations"`, `"description":"`+strings.Repeat("x", 300)+`","annotations"`, 1))},
		"error status": {`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, listAnswer)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			h := annHandler(t, f, func(c *setup) {
				c.Tools = []ToolPolicy{{Name: "files_write"}}
				c.MaxResponseSize = int64(len(listAnswer) + 100)
			})
			polServe(t, h, polPost(tc.body, tok), tc.reply)
			// Learned as read-only, lookup would be allowed to ro:read;
			// unlearned, tool_default denies it.
			if fwd, _ := annCall(t, h, tok, "lookup"); fwd {
				t.Error("lookup's class was learned")
			}
		})
	}
}

// TestToolAnnotationsPerHost: the classes learned from one Host's
// tools/list do not decide for another: an upstream answering per Host
// must not let a client's Host declare the site's tools read-only (as
// endpoint discovery must not let it choose the handshake's endpoints).
func TestToolAnnotationsPerHost(t *testing.T) {
	f := newFixture(t)
	h := annHandler(t, f, nil)
	evilTok := f.jwt(t, func(tm *vc.Template) { tm.Scopes, tm.Audience = []string{"ro:read"}, []string{"https://evil.test"} })
	r := polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, evilTok)
	r.Host = "evil.test"
	if res := polServe(t, h, r, annListReply); res.rec.Code != http.StatusOK {
		t.Fatalf("tools/list at evil.test: HTTP %d %s", res.rec.Code, res.rec.Body)
	}
	ro := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"ro:read"} })
	if fwd, _ := annCall(t, h, ro, "lookup"); fwd {
		t.Fatal("a class learned at evil.test decided a call at " + testHost)
	}
	annList(t, h, ro)
	if fwd, m := annCall(t, h, ro, "lookup"); !fwd {
		t.Fatalf("lookup after this site's own tools/list: %+v", m.Result)
	}
}
