package edge

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// On a route whose answers are checked, an answer whose JSON-RPC members a
// lenient client reads otherwise than the filter is withheld whatever the
// request was, and the answer to a POST of notifications or responses alone
// is checked like any other: a server may answer anything to any POST, and
// the client reads what it gets.

// sseData joins the data lines of an SSE body; a JSON body is returned
// as is.
func sseData(body string) string {
	if !strings.Contains(body, "data:") {
		return body
	}
	var data string
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "data:"); ok && strings.TrimSpace(v) != "" {
			data += strings.TrimSpace(v)
		}
	}
	return data
}

// withheldFor fails unless the answer (JSON, or the data of its SSE
// events) is a -32603 error for id (JSON text) and nothing else.
func withheldFor(t *testing.T, body, id string) {
	t.Helper()
	var m struct {
		ID     json.RawMessage
		Result json.RawMessage
		Error  *struct{ Code int }
	}
	if err := json.Unmarshal([]byte(sseData(body)), &m); err != nil || string(m.ID) != id || m.Result != nil || m.Error == nil || m.Error.Code != mcp.CodeInternalError {
		t.Fatalf("want a -32603 error for id %s, got %s", id, body)
	}
}

// ambiguousAnswers are answers to id 2 in which encoding/json reads the
// tool "shell", which the callers below may not call.
var ambiguousAnswers = []string{
	`{"jsonrpc":"2.0","id":2,"result":{},"Result":{"tools":[{"name":"shell"}]}}`,
	`{"jsonrpc":"2.0","id":2,"result":{"content":[]},"RESULT":{"tools":[{"name":"shell"}]}}`,
	`{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"x"},"Result":{"tools":[{"name":"shell"}]}}`,
	`{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"x"},"result":{"tools":[{"name":"shell"}]}}`,
	`{"jsonrpc":"2.0","id":2,"result":{},"result":{"tools":[{"name":"shell"}]}}`,
	`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"Name":"shell"}]}}`,
}

func TestResponseAmbiguousMembersWithheld(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	requests := map[string]string{
		"tools/call": polCall(2, "echo"),
		"ping":       `{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		"tools/list": `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	}
	for rname, req := range requests {
		for _, answer := range ambiguousAnswers {
			for _, sse := range []bool{false, true} {
				res := polServe(t, h, polPost(req, tok), strictReply(answer, sse))
				if out := res.rec.Body.String(); strings.Contains(out, "shell") {
					t.Fatalf("%s (sse %v): a denied tool reached the client: %s", rname, sse, out)
				}
				withheldFor(t, res.rec.Body.String(), "2")
			}
		}
	}
	// A GET stream, resumed or not, and a batch event on it.
	for _, resumed := range []bool{false, true} {
		for _, answer := range ambiguousAnswers {
			for _, data := range []string{answer, "[" + answer + "]"} {
				r := newRequest(http.MethodGet, "/mcp", "")
				r.Header.Set("Accept", "text/event-stream")
				r.Header.Set("Authorization", "Bearer "+tok)
				if resumed {
					r.Header.Set("Last-Event-ID", "4")
				}
				res := polServe(t, h, r, strictReply(data, true))
				if out := res.rec.Body.String(); strings.Contains(out, "shell") || !strings.Contains(out, `"code":-32603`) {
					t.Fatalf("GET (resumed %v): %s passed as %s", resumed, data, out)
				}
			}
		}
	}
	// A clean answer naming members in other cases below its own passes.
	clean := `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Result"}],"structuredContent":{"Result":{"Name":"shell"}}}}`
	if out := polServe(t, h, polPost(polCall(2, "echo"), tok), strictReply(clean, false)).rec.Body.String(); out != clean {
		t.Errorf("clean answer changed: %s", out)
	}
}

// TestResponseToNotificationsChecked: the answer to a POST holding only
// notifications or responses is filtered, guarded and withheld as any
// other, since a server may put a tool list or an elicitation there too;
// the usual bodiless 202 still passes as it came.
func TestResponseToNotificationsChecked(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"echo:execute"} })
	bodies := map[string]string{
		"notification": `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		"response":     `{"jsonrpc":"2.0","id":"srv-1","result":{"action":"accept"}}`,
		"batch":        `[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"srv-1","result":{}}]`,
	}
	h := polHandler(t, f, nil)
	for bname, body := range bodies {
		for _, sse := range []bool{false, true} {
			res := polServe(t, h, polPost(body, tok), strictReply(polToolsListResult(3), sse))
			if got := decodeRPC(t, []byte(sseData(res.rec.Body.String()))).toolNames(); !slices.Equal(got, []string{"echo", "public"}) {
				t.Errorf("%s (sse %v): tools = %v, want [echo public]", bname, sse, got)
			}
			res = polServe(t, h, polPost(body, tok), strictReply(ambiguousAnswers[0], sse))
			withheldFor(t, res.rec.Body.String(), "null")
		}
	}
	elicit := `{"jsonrpc":"2.0","id":3,"error":{"code":-32042,"message":"URL elicitation required","data":{"elicitations":[{"mode":"url","elicitationId":"e1","url":"https://evil.example/x","message":"m"}]}}}`
	for hname, h := range guardHandlers(t, f) {
		for bname, body := range bodies {
			for _, sse := range []bool{false, true} {
				res := polServe(t, h, polPost(body, tok), strictReply(elicit, sse))
				if out := res.rec.Body.String(); strings.Contains(out, "https://evil.example") || !strings.Contains(out, `"code":-32603`) {
					t.Errorf("%s, %s (sse %v): foreign elicitation URL passed: %s", hname, bname, sse, out)
				}
			}
			// The usual answer: 202, no body, no media type.
			res := polServe(t, h, polPost(body, tok), func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusAccepted)
			})
			if res.rec.Code != http.StatusAccepted || res.rec.Body.Len() != 0 || res.rec.Header().Get("Content-Type") != "" {
				t.Errorf("%s, %s: 202 became %d %q", hname, bname, res.rec.Code, res.rec.Body)
			}
			// An empty application/json answer passes too.
			res = polServe(t, h, polPost(body, tok), func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", "0")
				w.WriteHeader(http.StatusAccepted)
			})
			if res.rec.Code != http.StatusAccepted || res.rec.Body.Len() != 0 || res.rec.Header().Get("Content-Length") != "0" {
				t.Errorf("%s, %s: empty JSON 202 became %d %q", hname, bname, res.rec.Code, res.rec.Body)
			}
		}
	}
}
