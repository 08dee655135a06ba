package mcp

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

// decodeResponse parses a JSON-RPC response built by this package.
func decodeResponse(t *testing.T, b []byte) (id json.RawMessage, result map[string]any) {
	t.Helper()
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  map[string]any  `json:"result"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if r.JSONRPC != "2.0" {
		t.Fatalf("jsonrpc = %q", r.JSONRPC)
	}
	// What we build must also parse as a response.
	msgs, _, err := ParseMessages(b)
	if err != nil || !IsResponse(msgs[0]) {
		t.Fatalf("ParseMessages: %v", err)
	}
	return r.ID, r.Result
}

func textOf(t *testing.T, result map[string]any) string {
	t.Helper()
	content, ok := result["content"].([]any)
	if !ok || len(content) != 1 {
		t.Fatalf("content = %v", result["content"])
	}
	block := content[0].(map[string]any)
	if block["type"] != "text" {
		t.Fatalf("content type = %v", block["type"])
	}
	return block["text"].(string)
}

func TestToolErrorResult(t *testing.T) {
	b := ToolErrorResult(json.RawMessage(`"req-1"`), "no <access> & more", map[string]any{"error": "x", "n": 1})
	id, res := decodeResponse(t, b)
	if string(id) != `"req-1"` {
		t.Errorf("id = %s", id)
	}
	if res["isError"] != true || textOf(t, res) != "no <access> & more" {
		t.Errorf("result = %v", res)
	}
	if sc := res["structuredContent"].(map[string]any); sc["error"] != "x" || sc["n"] != 1.0 {
		t.Errorf("structuredContent = %v", sc)
	}
	if strings.Contains(string(b), `\u0026`) {
		t.Errorf("HTML-escaped: %s", b)
	}

	b = ToolErrorResult(json.RawMessage(`42`), "t", nil)
	id, res = decodeResponse(t, b)
	if string(id) != "42" {
		t.Errorf("id = %s", id)
	}
	if _, ok := res["structuredContent"]; ok {
		t.Errorf("nil structured content present: %s", b)
	}

	for _, bad := range []string{``, `{}`, `[1]`, `true`, `"unterminated`} {
		id, _ := decodeResponse(t, ToolErrorResult(json.RawMessage(bad), "t", nil))
		if string(id) != "null" {
			t.Errorf("id %q became %s, want null", bad, id)
		}
	}

	// Structured content that cannot be encoded is dropped, not fatal.
	b = ToolErrorResult(json.RawMessage(`1`), "t", map[string]any{"f": func() {}})
	if _, res := decodeResponse(t, b); res["structuredContent"] != nil || textOf(t, res) != "t" {
		t.Errorf("unencodable: %s", b)
	}
}

func TestErrorResponse(t *testing.T) {
	b := ErrorResponse(nil, CodeParseError, "mcp: invalid JSON")
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.JSONRPC != "2.0" || string(r.ID) != "null" || r.Error.Code != -32700 || r.Error.Message != "mcp: invalid JSON" {
		t.Errorf("got %s", b)
	}
}

func TestNeedsAuthorizationResult(t *testing.T) {
	expires := time.UnixMilli(1737457200000)
	n := NeedsAuthorization{
		Tool:        "checkout",
		Missing:     []string{"checkout:execute", "payment:process"},
		ConsentURL:  "https://auth.example.com/consent?tenant=a%20b&tool=evil&scopes=all#frag",
		AgentDID:    "did:key:z6MkAgent",
		ResumeToken: "resume_123",
		SessionID:   "sess 1",
		ProjectID:   "p1",
		ExpiresAt:   expires,
	}
	b := NeedsAuthorizationResult(json.RawMessage(`7`), n)
	id, res := decodeResponse(t, b)
	if string(id) != "7" || res["isError"] != true {
		t.Fatalf("%s", b)
	}

	// The consent URL: our parameters, comma-joined scopes, the page's own
	// parameters kept, the ones we set replaced, the fragment kept.
	wantURL := "https://auth.example.com/consent?tenant=a%20b&tool=checkout&scopes=checkout%3Aexecute%2Cpayment%3Aprocess" +
		"&session_id=sess+1&agent_did=did%3Akey%3Az6MkAgent&project_id=p1&resume_token=resume_123#frag"

	sc := res["structuredContent"].(map[string]any)
	if sc["status"] != "handshake_required" || !strings.Contains(sc["message"].(string), wantURL) {
		t.Errorf("structuredContent = %v", sc)
	}
	action := sc["_meta"].(map[string]any)["handshakeAction"].(map[string]any)
	if action["_action"] != "auth_required" || action["provider"] != "mcp-i" || action["authUrl"] != wantURL {
		t.Errorf("handshakeAction = %v", action)
	}
	meta := action["meta"].(map[string]any)
	if meta["toolName"] != "checkout" || len(meta["scopes"].([]any)) != 2 || meta["description"] == "" {
		t.Errorf("action meta = %v", meta)
	}
	u, err := url.Parse(action["authUrl"].(string))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("tool") != "checkout" || q.Get("scopes") != "checkout:execute,payment:process" || q.Get("agent_did") != "did:key:z6MkAgent" ||
		q.Get("resume_token") != "resume_123" || q.Get("tenant") != "a b" || len(q["tool"]) != 1 || len(q["scopes"]) != 1 {
		t.Errorf("query = %v", q)
	}

	m := res["_meta"].(map[string]any)
	want := map[string]any{
		"error":            "needs_authorization",
		"authorizationUrl": wantURL,
		"consentUrl":       wantURL,
		"resumeToken":      "resume_123",
		"expiresAt":        1737457200000.0,
		"errorType":        "authorization_required",
		"toolName":         "checkout",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("_meta.%s = %v, want %v", k, m[k], v)
		}
	}
	for _, k := range []string{"scopes", "requiredScopes"} {
		got := m[k].([]any)
		if len(got) != 2 || got[0] != "checkout:execute" || got[1] != "payment:process" {
			t.Errorf("_meta.%s = %v", k, got)
		}
	}
	if m["message"] != sc["message"] || !strings.Contains(textOf(t, res), wantURL) {
		t.Errorf("message mismatch: %v / %v", m["message"], textOf(t, res))
	}
	// The field order @kya-os/mcp-i-cloudflare writes.
	if i, j := strings.Index(string(b), `"error":"needs_authorization"`), strings.Index(string(b), `"consentUrl"`); i < 0 || j < i {
		t.Errorf("_meta order: %s", b)
	}
}

func TestNeedsAuthorizationResultMinimal(t *testing.T) {
	b := NeedsAuthorizationResult(json.RawMessage(`"x"`), NeedsAuthorization{Tool: "t", Missing: []string{"t:execute"}, ConsentURL: "https://c.example/consent"})
	_, res := decodeResponse(t, b)
	m := res["_meta"].(map[string]any)
	if m["authorizationUrl"] != "https://c.example/consent?tool=t&scopes=t%3Aexecute" {
		t.Errorf("authorizationUrl = %v", m["authorizationUrl"])
	}
	if _, ok := m["resumeToken"]; ok {
		t.Error("empty resumeToken present")
	}
	if _, ok := m["expiresAt"]; ok {
		t.Error("zero expiresAt present")
	}
}

func TestNeedsAuthorizationResultPlain(t *testing.T) {
	for _, consent := range []string{"", "not a url", "/relative", "ftp://x.example/c", "https://user@x.example/c", "https://"} {
		b := NeedsAuthorizationResult(json.RawMessage(`3`), NeedsAuthorization{Tool: "files_write", Missing: []string{"files:write", "files:admin"}, ConsentURL: consent, AgentDID: "did:x"})
		_, res := decodeResponse(t, b)
		if res["isError"] != true {
			t.Errorf("%q: not an error: %s", consent, b)
		}
		text := textOf(t, res)
		if !strings.Contains(text, "files:write, files:admin") || !strings.Contains(text, `"files_write"`) {
			t.Errorf("%q: text %q", consent, text)
		}
		sc := res["structuredContent"].(map[string]any)
		req := sc["requiredScopes"].([]any)
		if sc["error"] != "insufficient_scope" || sc["toolName"] != "files_write" || len(req) != 2 {
			t.Errorf("%q: structuredContent %v", consent, sc)
		}
		if _, ok := res["_meta"]; ok || strings.Contains(string(b), "handshakeAction") {
			t.Errorf("%q: plain result carries an action: %s", consent, b)
		}
	}
	// No missing scopes still gives valid arrays, not null.
	b := NeedsAuthorizationResult(nil, NeedsAuthorization{Tool: "t", ConsentURL: "https://c.example/"})
	if _, res := decodeResponse(t, b); res["_meta"].(map[string]any)["scopes"] == nil {
		t.Errorf("scopes null: %s", b)
	}
}

func TestSetQuery(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://a.example", "https://a.example?k=v"},
		{"https://a.example/p?", "https://a.example/p?k=v"},
		{"https://a.example/p?x=1&&k=old&y=2", "https://a.example/p?x=1&y=2&k=v"},
		{"https://a.example/p?%6B=old#f?k=frag", "https://a.example/p?k=v#f?k=frag"},
		{"https://a.example/p?k", "https://a.example/p?k=v"},
		{"https://a.example/p?bad=%zz", "https://a.example/p?bad=%zz&k=v"},
	}
	for _, tt := range tests {
		if got := setQuery(tt.in, [][2]string{{"k", "v"}}); got != tt.want {
			t.Errorf("setQuery(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := setQuery("https://a.example/", [][2]string{{"d", "did:web:x y"}}); got != "https://a.example/?d=did%3Aweb%3Ax+y" {
		t.Errorf("escaping: %q", got)
	}
}
