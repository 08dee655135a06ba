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
	}{
		{name: "2026 own host passes with context_did", in: ir(`"https://login.example.com/x"`), mode: ActionsEnforce,
			want: `"url":"https://login.example.com/x?context_did=did%3Aweb%3Auser"`},
		{name: "2026 foreign host replaced", in: ir(`"https://evil.example.net/x"`), mode: ActionsEnforce,
			want: `"resultType":"complete"`, notWant: "evil.example.net/x", issue: IssueForeignHost},
		{name: "2026 http refused", in: ir(`"http://login.example.com/x"`), mode: ActionsEnforce, notWant: "http://login", issue: IssueInsecureURL},
		{name: "2026 foreign host observed", in: ir(`"https://evil.example.net/x"`), mode: ActionsObserve, want: "https://evil.example.net/x", issue: IssueForeignHost, sameBody: true},
		{name: "2026 url without mode is URL mode", in: strings.Replace(ir(`"https://evil.example.net/"`), `"mode":"url",`, "", 1), mode: ActionsEnforce, issue: IssueForeignHost},
		{name: "2026 url case twin ambiguous", in: strings.Replace(ir(`"https://login.example.com/"`), `"message"`, `"URL":"https://evil.example.net/","message"`, 1), mode: ActionsEnforce, issue: IssueAmbiguous},
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
			if err != nil {
				t.Fatal(err)
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
