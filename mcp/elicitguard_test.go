package mcp

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestElicitationGuard(t *testing.T) {
	opts := ActionOptions{ToolEndpointHost: "mcp.example.com", UserDID: "did:web:user", Era: Era2026}
	ir := func(url string) string {
		return `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"mode":"url","message":"m","url":` +
			url + `,"elicitationId":"e"}}},"requestState":"s"}}`
	}
	req := func(params string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":` + params + `}`
	}
	ids := map[string]string{IDKey(json.RawMessage("1")): MethodToolsCall}
	for _, tt := range []struct {
		name     string
		in       string
		mode     ActionMode
		want     string // substring of the output
		notWant  string
		issue    string // code of the first issue
		sameBody bool
		err      bool // the body cannot be read strictly
	}{
		{name: "2026 own host passes with context_did", in: ir(`"https://login.example.com/x"`), mode: ActionsEnforce,
			want: `"url":"https://login.example.com/x?context_did=did%3Aweb%3Auser"`},
		{name: "2026 foreign host replaced", in: ir(`"https://evil.example.net/x"`), mode: ActionsEnforce,
			want: `"resultType":"complete"`, notWant: "evil.example.net/x", issue: IssueForeignHost},
		{name: "2026 http refused", in: ir(`"http://login.example.com/x"`), mode: ActionsEnforce, notWant: "http://login", issue: IssueInsecureURL},
		{name: "2026 foreign host observed", in: ir(`"https://evil.example.net/x"`), mode: ActionsObserve, want: "https://evil.example.net/x", issue: IssueForeignHost, sameBody: true},
		{name: "2026 url without mode is URL mode", in: strings.Replace(ir(`"https://evil.example.net/"`), `"mode":"url",`, "", 1), mode: ActionsEnforce, issue: IssueForeignHost},
		{name: "2026 url case twin unreadable", in: strings.Replace(ir(`"https://login.example.com/"`), `"message"`, `"URL":"https://evil.example.net/","message"`, 1), mode: ActionsEnforce, err: true},
		{name: "2026 form mode untouched", in: `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"mode":"form","message":"m","requestedSchema":{}}}}}}`,
			mode: ActionsEnforce, sameBody: true},
		{name: "2025 request own host", in: req(`{"mode":"url","message":"m","url":"https://a.example.com/","elicitationId":"e"}`), mode: ActionsEnforce,
			want: `"url":"https://a.example.com/?context_did=did%3Aweb%3Auser"`},
		{name: "2025 request foreign host withheld", in: req(`{"mode":"url","message":"m","url":"https://evil.example.net/","elicitationId":"e"}`), mode: ActionsEnforce,
			want: `"method":"notifications/message"`, notWant: "elicitation/create", issue: IssueForeignHost},
		{name: "2025 request foreign host observed", in: req(`{"mode":"url","message":"m","url":"https://evil.example.net/"}`), mode: ActionsObserve, issue: IssueForeignHost, sameBody: true},
		{name: "2025 form request untouched", in: req(`{"message":"m","requestedSchema":{"type":"object"}}`), mode: ActionsEnforce, sameBody: true},
		{name: "2025 request url not a string", in: req(`{"mode":"url","message":"m","url":1}`), mode: ActionsEnforce, issue: IssueMalformed, notWant: "elicitation/create"},
		{name: "batch with a request", in: "[" + req(`{"mode":"url","message":"m","url":"https://evil.example.net/"}`) + `,{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]`,
			mode: ActionsEnforce, issue: IssueForeignHost, want: `notifications/progress`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, issues, err := CheckResponseBody([]byte(tt.in), ids, opts, tt.mode)
			if tt.err || err != nil {
				if !tt.err {
					t.Fatal(err)
				}
				if err == nil {
					t.Fatalf("read, want an error: %s", out)
				}
				return
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON out: %s", out)
			}
			if tt.issue == "" && len(issues) > 0 || tt.issue != "" && (len(issues) == 0 || issues[0].Code != tt.issue) {
				t.Errorf("issues %v, want %q", issues, tt.issue)
			}
			if tt.want != "" && !strings.Contains(string(out), tt.want) {
				t.Errorf("output lacks %s: %s", tt.want, out)
			}
			if tt.notWant != "" && strings.Contains(string(out), tt.notWant) {
				t.Errorf("output has %s: %s", tt.notWant, out)
			}
			if tt.sameBody && string(out) != tt.in {
				t.Errorf("changed: %s", out)
			}
		})
	}
}

// TestElicitationGuardEveryMethod: a URL elicitation is
// refused whatever request the answer is for, not only tools/call.
func TestElicitationGuardEveryMethod(t *testing.T) {
	opts := ActionOptions{ToolEndpointHost: "mcp.example.com", Era: Era2026}
	ir := `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"mode":"url","message":"m","url":"javascript:alert(1)","elicitationId":"e"}}}}}`
	req := `{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{"mode":"url","message":"m","url":"javascript:alert(1)","elicitationId":"e"}}`
	for _, method := range []string{"prompts/get", "resources/read", "ping", "subscriptions/listen", "tools/list", MethodToolsCall} {
		ids := map[string]string{IDKey(json.RawMessage("1")): method}
		t.Run("2026 "+method, func(t *testing.T) {
			out, issues, err := CheckResponseBody([]byte(ir), ids, opts, ActionsEnforce)
			if err != nil {
				t.Fatal(err)
			}
			if len(issues) == 0 || issues[0].Code != IssueInsecureURL || strings.Contains(string(out), "javascript:") {
				t.Fatalf("issues %v, out %s", issues, out)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(out, &m); err != nil || string(m["id"]) != "1" {
				t.Fatalf("out %s: %v", out, err)
			}
			if method != MethodToolsCall && (m["error"] == nil || m["result"] != nil) {
				t.Errorf("want a JSON-RPC error for %s: %s", method, out)
			}
		})
		t.Run("2026 observe "+method, func(t *testing.T) {
			out, issues, err := CheckResponseBody([]byte(ir), ids, opts, ActionsObserve)
			if err != nil || len(issues) == 0 || string(out) != ir {
				t.Fatalf("issues %v, err %v, out %s", issues, err, out)
			}
		})
		t.Run("2025 request on the stream of "+method, func(t *testing.T) {
			body := `[` + req + `,{"jsonrpc":"2.0","id":1,"result":{"messages":[]}}]`
			out, issues, err := CheckResponseBody([]byte(body), ids, opts, ActionsEnforce)
			if err != nil {
				t.Fatal(err)
			}
			if len(issues) == 0 || strings.Contains(string(out), "javascript:") || !strings.Contains(string(out), `"messages":[]`) {
				t.Fatalf("issues %v, out %s", issues, out)
			}
		})
	}
}

// TestElicitationGuardStrict: where the guard looks,
// member names a case-insensitive client would merge or fold are refused:
// an error (the answer is withheld) or an ambiguous issue, never a pass.
func TestElicitationGuardStrict(t *testing.T) {
	opts := ActionOptions{ToolEndpointHost: "mcp.example.com", Era: Era2026}
	const bad = `{"mode":"url","message":"m","url":"javascript:alert(1)"}`
	result := func(irs string) string {
		return `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":` + irs + `}}`
	}
	for _, tt := range []struct{ name, in string }{
		{"Method twin", result(`{"a":{"method":"x","Method":"elicitation/create","params":` + bad + `}}`)},
		{"Method alone", result(`{"a":{"Method":"elicitation/create","params":` + bad + `}}`)},
		{"Params", result(`{"a":{"method":"elicitation/create","Params":` + bad + `}}`)},
		{"params with long s", result(`{"a":{"method":"elicitation/create","paramſ":` + bad + `}}`)},
		{"params escaped", result(`{"a":{"method":"elicitation/create","p\u0041rams":` + bad + `}}`)},
		{"params twice", result(`{"a":{"method":"elicitation/create","params":{"mode":"form"},"params":` + bad + `}}`)},
		{"InputRequests", `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","InputRequests":{"a":{"method":"elicitation/create","params":` + bad + `}}}}`},
		{"inputRequests twice", `{"jsonrpc":"2.0","id":1,"result":{"inputRequests":{},"inputRequests":{"a":{"method":"elicitation/create","params":` + bad + `}}}}`},
		{"Result", `{"jsonrpc":"2.0","id":1,"result":{},"Result":{"inputRequests":{"a":{"method":"elicitation/create","params":` + bad + `}}}}`},
		{"2025 Method", `{"jsonrpc":"2.0","id":9,"method":"x","Method":"elicitation/create","params":` + bad + `}`},
		{"2025 Params", `{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{},"Params":` + bad + `}`},
		{"2025 Params alone", `{"jsonrpc":"2.0","id":9,"method":"elicitation/create","PARAMS":` + bad + `}`},
		{"handshakeAction variant", `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"_meta":{"HandshakeAction":{"_action":"auth_required","provider":"p","authUrl":"javascript:x"}}}}}`},
	} {
		for _, method := range []string{MethodToolsCall, "prompts/get", ""} {
			if method == "prompts/get" && strings.Contains(tt.name, "handshakeAction") {
				continue // handshake actions are read in tool results only
			}
			t.Run(tt.name+" "+method, func(t *testing.T) {
				ids := map[string]string{IDKey(json.RawMessage("1")): method}
				out, issues, err := CheckResponseBody([]byte(tt.in), ids, opts, ActionsEnforce)
				if err != nil {
					return // withheld
				}
				if len(issues) == 0 || strings.Contains(string(out), "javascript:") {
					t.Fatalf("passed: issues %v, out %s", issues, out)
				}
			})
		}
	}
}

func TestMayHoldGuarded(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, false},
		{`{"result":{"content":[{"type":"text","text":"url: https://x"}]}}`, false},
		{`{"result":{"inputRequests":{}}}`, true},
		{`{"result":{"INPUTREQUESTS":{}}}`, true},
		{`{"method":"Elicitation/create"}`, true},
		{`{"result":{"structuredContent":{"_meta":{"handshakeAction":{}}}}}`, true},
		{`{"result":{"inputRequeſts":{}}}`, true},
		{`{"result":{"\u0069nputRequests":{}}}`, true},
		{`{"result":{"text":"a\\\\u"}}`, true}, // an escaped backslash before u: read, to be safe
		{`{"result":{"text":"no inputRequests mid-string"}}`, false},
		{`{"result":{"text":"x","İnputRequests":{}}}`, true},
		{`"elicitation`, true},
		{`{"a":"`, false},
		{`{"result":{"text":"\"elicitation"}}`, true},
		{`{"result":{"text":"Kelvin \u212a"}}`, true},
		{`{"result":{"text":"é"}}`, false},
		{`elicitatio`, false},
	} {
		if got := mayHoldGuarded([]byte(tt.in)); got != tt.want {
			t.Errorf("mayHoldGuarded(%s) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
