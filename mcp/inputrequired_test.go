package mcp

import (
	"encoding/json"
	"testing"
)

func TestDeclaresURLElicitation(t *testing.T) {
	for _, tt := range []struct {
		params string
		want   bool
	}{
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}}`, true},
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{},"form":{}}}}}`, true},
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}`, false},
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}`, false},
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":true}}}}`, false},
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":null}}}}`, false},
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{},"URL":{}}}}}`, false},
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}},"_META":{}}`, false},
		{`{"capabilities":{"elicitation":{"url":{}}}}`, false},
		{`[]`, false}, {``, false}, {`{"_meta":"x"}`, false},
	} {
		if got := DeclaresURLElicitation([]byte(tt.params)); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.params, got, tt.want)
		}
	}
}

func TestRequestStateOf(t *testing.T) {
	for _, tt := range []struct {
		params string
		state  string
		ok     bool
		bad    bool
	}{
		{`{"name":"t","requestState":"abc"}`, "abc", true, false},
		{`{"name":"t"}`, "", false, false},
		{`{"name":"t","requestState":null}`, "", false, false},
		{`{"name":"t","requestState":1}`, "", false, true},
		{`{"name":"t","requestState":"a","requestState":"b"}`, "", false, true},
		{`{"name":"t","requestState":"a","RequestState":"b"}`, "", false, true},
	} {
		s, ok, err := RequestStateOf([]byte(tt.params))
		if s != tt.state || ok != tt.ok || (err != nil) != tt.bad {
			t.Errorf("%s: %q %v %v", tt.params, s, ok, err)
		}
		if err != nil && ErrorCode(err) != CodeInvalidParams {
			t.Errorf("%s: code %d", tt.params, ErrorCode(err))
		}
	}
}

func TestNeedsAuthorizationInput(t *testing.T) {
	n := NeedsAuthorization{Tool: "t", Missing: []string{"a", "b"}, ConsentURL: "https://c.example/ok?x=1", AgentDID: "did:key:z", ResumeToken: "rt", Era: Era2026}
	b, ok := NeedsAuthorizationInput(json.RawMessage(`"q"`), n, "state")
	if !ok {
		t.Fatal("no prompt")
	}
	var m struct {
		ID     string `json:"id"`
		Result struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
			Content       any                        `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.ID != "q" || m.Result.ResultType != ResultTypeInputRequired ||
		m.Result.RequestState != "state" || len(m.Result.InputRequests) != 1 || m.Result.Content != nil {
		t.Fatalf("%s (%v)", b, err)
	}
	want := `{"method":"elicitation/create","params":{"mode":"url","message":"Tool \"t\" needs authorization for scope(s) a, b. Approve access at the link, then retry.","url":"https://c.example/ok?x=1&tool=t&scopes=a%2Cb&agent_did=did%3Akey%3Az&resume_token=rt","elicitationId":"rt"}}`
	if got := string(m.Result.InputRequests[ConsentInputID]); got != want {
		t.Errorf("input request\n%s\nwant\n%s", got, want)
	}
	for _, bad := range []NeedsAuthorization{{Tool: "t", ResumeToken: "rt"}, {Tool: "t", ConsentURL: "ftp://x/", ResumeToken: "rt"}, {Tool: "t", ConsentURL: "https://c.example/"}} {
		if _, ok := NeedsAuthorizationInput(nil, bad, "s"); ok {
			t.Errorf("prompt for %+v", bad)
		}
	}
}

func FuzzRequestParams2026(f *testing.F) {
	f.Add([]byte(`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}},"requestState":"s"}`))
	f.Add([]byte(`{"requestState":"a","ReQuestState":1}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		if _, _, err := ParseMessages(append(append([]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":`), params...), '}')); err != nil {
			return // only params a parsed message can hold
		}
		_ = DeclaresURLElicitation(params)
		if _, _, err := RequestStateOf(params); err != nil && ErrorCode(err) != CodeInvalidParams {
			t.Fatalf("error %v", err)
		}
		_, _ = metaProtocolVersion(params)
	})
}
