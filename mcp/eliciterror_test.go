package mcp

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestElicitationErrorGuard: the URL-mode elicitations of a
// URLElicitationRequiredError (-32042) meet the same guard as an authUrl
// : a foreign or plain-http URL replaces the answer with a
// JSON-RPC error (enforce) or is reported (observe), an allowed one gets
// context_did.
func TestElicitationErrorGuard(t *testing.T) {
	opts := ActionOptions{ToolEndpointHost: "mcp.example.com", UserDID: "did:web:user", Era: Era2025}
	errAnswer := func(id, elicitations string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32042,"message":"URL elicitation required","data":{"elicitations":` + elicitations + `}}}`
	}
	el := func(url string) string {
		return `{"mode":"url","elicitationId":"e1","url":` + url + `,"message":"Authorize"}`
	}
	for _, ids := range []map[string]string{
		{IDKey(json.RawMessage("2")): MethodToolsCall},
		{IDKey(json.RawMessage("2")): "prompts/get"},
		nil,
	} {
		for _, tt := range []struct {
			name     string
			in       string
			mode     ActionMode
			want     string // substring of the output
			notWant  string
			issue    string // code of the first issue
			sameBody bool
			err      bool // not read strictly: withheld by the edge
		}{
			{name: "foreign host withheld", in: errAnswer("2", "["+el(`"https://evil.example/consent"`)+"]"), mode: ActionsEnforce,
				want: `"code":-32603`, notWant: "https://evil.example", issue: IssueForeignHost},
			{name: "http withheld", in: errAnswer("2", "["+el(`"http://login.example.com/x"`)+"]"), mode: ActionsEnforce,
				want: `"id":2`, notWant: "http://login", issue: IssueInsecureURL},
			{name: "second of two foreign", in: errAnswer("2", "["+el(`"https://login.example.com/x"`)+","+el(`"https://evil.example/"`)+"]"), mode: ActionsEnforce,
				notWant: "https://evil.example", issue: IssueForeignHost},
			{name: "url without mode", in: errAnswer("2", `[{"url":"https://evil.example/","message":"m"}]`), mode: ActionsEnforce,
				notWant: "https://evil.example", issue: IssueForeignHost},
			{name: "empty mode is URL mode", in: errAnswer("2", `[{"mode":"","url":"https://evil.example/"}]`), mode: ActionsEnforce,
				notWant: "https://evil.example", issue: IssueForeignHost},
			{name: "null mode is URL mode", in: errAnswer("2", `[{"mode":null,"url":"https://evil.example/"}]`), mode: ActionsEnforce,
				notWant: "https://evil.example", issue: IssueForeignHost},
			{name: "url not a string", in: errAnswer("2", `[{"mode":"url","url":7}]`), mode: ActionsEnforce,
				notWant: "-32042", issue: IssueMalformed},
			{name: "any error code", in: strings.Replace(errAnswer("2", "["+el(`"https://evil.example/"`)+"]"), "-32042", "-32000", 1), mode: ActionsEnforce,
				notWant: "https://evil.example", issue: IssueForeignHost},
			{name: "Data variant", in: `{"jsonrpc":"2.0","id":2,"error":{"code":-32042,"message":"m","Data":{"elicitations":[` + el(`"https://evil.example/"`) + `]}}}`, mode: ActionsEnforce,
				notWant: "https://evil.example", issue: IssueAmbiguous},
			{name: "Elicitations variant", in: `{"jsonrpc":"2.0","id":2,"error":{"code":-32042,"message":"m","data":{"Elicitations":[` + el(`"https://evil.example/"`) + `]}}}`, mode: ActionsEnforce,
				notWant: "https://evil.example", issue: IssueAmbiguous},
			{name: "URL variant", in: errAnswer("2", `[{"mode":"url","URL":"https://evil.example/"}]`), mode: ActionsEnforce,
				notWant: "https://evil.example", issue: IssueAmbiguous},
			{name: "elicitations twice", in: `{"jsonrpc":"2.0","id":2,"error":{"code":-32042,"message":"m","data":{"elicitations":[],"elicitations":[` + el(`"https://evil.example/"`) + `]}}}`,
				mode: ActionsEnforce, err: true},
			{name: "foreign host observed", in: errAnswer("2", "["+el(`"https://evil.example/consent"`)+"]"), mode: ActionsObserve,
				issue: IssueForeignHost, sameBody: true},
			{name: "own host gets context_did", in: errAnswer("2", "["+el(`"https://login.example.com/x"`)+"]"), mode: ActionsEnforce,
				want: `"url":"https://login.example.com/x?context_did=did%3Aweb%3Auser"`},
			{name: "batch: only the bad answer replaced", in: "[" + errAnswer("2", "["+el(`"https://evil.example/"`)+"]") + `,{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"nope"}}]`,
				mode: ActionsEnforce, want: `"message":"nope"`, notWant: "https://evil.example", issue: IssueForeignHost},
			{name: "form mode with a url is URL mode here", in: errAnswer("2", `[{"mode":"form","url":"https://evil.example/x","message":"m"}]`), mode: ActionsEnforce,
				notWant: "https://evil.example", issue: IssueForeignHost},
			{name: "form elicitations untouched", in: errAnswer("2", `[{"mode":"form","message":"m","requestedSchema":{}}]`), mode: ActionsEnforce, sameBody: true},
			{name: "plain error untouched", in: `{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no elicitation here","data":{"x":1}}}`, mode: ActionsEnforce, sameBody: true},
		} {
			t.Run(tt.name, func(t *testing.T) {
				out, issues, err := CheckResponseBody([]byte(tt.in), ids, opts, tt.mode)
				if tt.err {
					if err == nil {
						t.Fatalf("read, want an error: %s", out)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if !json.Valid(out) {
					t.Fatalf("invalid JSON out: %s", out)
				}
				if tt.want != "" && !strings.Contains(string(out), tt.want) {
					t.Errorf("out %s, want %s in it", out, tt.want)
				}
				if tt.notWant != "" && strings.Contains(string(out), tt.notWant) {
					t.Errorf("out %s, want no %s in it", out, tt.notWant)
				}
				if tt.sameBody != (string(out) == tt.in) {
					t.Errorf("out %s, same as in: want %v", out, tt.sameBody)
				}
				switch {
				case tt.issue == "" && len(issues) > 0:
					t.Errorf("issues %v, want none", issues)
				case tt.issue != "" && (len(issues) == 0 || issues[0].Code != tt.issue):
					t.Errorf("issues %v, want %s", issues, tt.issue)
				}
			})
		}
	}
}
