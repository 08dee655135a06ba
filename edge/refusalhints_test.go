package edge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// rpcError decodes a JSON-RPC error answer (id null), failing the test for
// anything else.
func rpcError(t *testing.T, rec *httptest.ResponseRecorder) (code int, message string) {
	t.Helper()
	var e struct {
		ID    json.RawMessage
		Error *struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == nil || string(e.ID) != "null" {
		t.Fatalf("not a JSON-RPC error with id null: %v: %s", err, rec.Body)
	}
	return e.Error.Code, e.Error.Message
}

// TestBodyTooLargeNamesLimit: a 413 names the limit and max_body_size,
// on a plain route and under a tool policy, for a body of known and of
// unknown length.
func TestBodyTooLargeNamesLimit(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	body := polCall(1, "echo") + strings.Repeat(" ", 600)
	for name, mod := range map[string]func(*setup){
		"plain":       func(c *setup) { c.MaxBodySize = 512 },
		"tool policy": func(c *setup) { c.MaxBodySize, c.Tools, c.ToolDefault = 512, polTools(), "allow" },
	} {
		h := f.handler(t, mod)
		for _, chunked := range []bool{false, true} {
			r := polPost(body, tok)
			if chunked {
				r.ContentLength = -1
			}
			res := polServe(t, h, r, nil)
			rtNotForwarded(t, res, name)
			e := decodeErr(t, res.rec)
			if res.rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(e.ErrorDescription, "max_body_size") ||
				!strings.Contains(e.ErrorDescription, "512 bytes") {
				t.Errorf("%s, chunked %t: HTTP %d %+v, want 413 naming max_body_size and 512 bytes", name, chunked, res.rec.Code, e)
			}
		}
	}
}

// TestWrongAudienceNamesAudiences: a wrong_audience refusal lists the
// audiences the route accepts, the configured ones, or those derived from
// the Host, in the body and in its description.
func TestWrongAudienceNamesAudiences(t *testing.T) {
	f := newFixture(t)
	other := f.jwt(t, func(tm *vc.Template) { tm.Audience = []string{"https://other.example"} })
	for _, tc := range []struct {
		name string
		mod  func(*setup)
		want []string
	}{
		{"derived from the Host", nil, []string{"did:web:" + testHost, "https://" + testHost, testHost}},
		{"configured", func(c *setup) { c.Audiences = []string{"did:web:api.example.com", "https://api.example.com"} },
			[]string{"did:web:api.example.com", "https://api.example.com"}},
	} {
		h := f.handler(t, tc.mod)
		res := polServe(t, h, polPost(polCall(1, "echo"), other), nil)
		var e struct {
			Reason           string   `json:"reason"`
			ErrorDescription string   `json:"error_description"`
			Audiences        []string `json:"audiences"`
		}
		if err := json.Unmarshal(res.rec.Body.Bytes(), &e); err != nil || res.rec.Code != http.StatusUnauthorized || e.Reason != "wrong_audience" {
			t.Fatalf("%s: HTTP %d %s", tc.name, res.rec.Code, res.rec.Body)
		}
		if !slices.Equal(e.Audiences, tc.want) || !strings.Contains(e.ErrorDescription, strings.Join(tc.want, ", ")) {
			t.Errorf("%s: audiences %v, description %q, want %v", tc.name, e.Audiences, e.ErrorDescription, tc.want)
		}
	}
	// Another reason names no audiences.
	expired := f.jwt(t, func(tm *vc.Template) {
		tm.NotBefore, tm.ExpiresAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	})
	res := polServe(t, f.handler(t, nil), polPost(polCall(1, "echo"), expired), nil)
	if res.rec.Code != http.StatusUnauthorized || strings.Contains(res.rec.Body.String(), "audiences") {
		t.Errorf("HTTP %d %s names audiences", res.rec.Code, res.rec.Body)
	}
}

// TestMalformedJSONIsParseError: a POST body that is not JSON gets HTTP
// 400 with the JSON-RPC parse error (-32700), whether the carriers read it
// (the default), only the answer checks read it (no body carrier), or a
// tool policy does; it never reaches the upstream.
func TestMalformedJSONIsParseError(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	for name, mod := range map[string]func(*setup){
		"body carriers":    nil,
		"no body carrier":  func(c *setup) { c.Carriers = []string{"authorization"} },
		"tool policy":      func(c *setup) { c.Tools, c.ToolDefault = polTools(), "allow" },
		"policy, carriers": func(c *setup) { c.Tools, c.ToolDefault, c.Carriers = polTools(), "allow", []string{"authorization"} },
	} {
		h := f.handler(t, mod)
		for _, body := range []string{`{"jsonrpc":"2.0","id":1,`, "\xef\xbb\xbf" + polCall(1, "echo"), `{"jsonrpc":"2.0","id":NaN,"method":"ping"}`} {
			res := polServe(t, h, polPost(body, tok), nil)
			rtNotForwarded(t, res, name)
			if code, msg := rpcError(t, res.rec); res.rec.Code != http.StatusBadRequest || code != mcp.CodeParseError || msg == "" {
				t.Errorf("%s, %q: HTTP %d %d %q, want 400 with -32700", name, body, res.rec.Code, code, msg)
			}
		}
	}
}

// TestNotJSONPostRefused: a POST with a body that is not declared JSON is
// refused 415 on any route, before the credential is looked at, with a
// JSON-RPC error saying to send Content-Type: application/json; JSON media
// types, bodiless POSTs, GET and DELETE go on.
func TestNotJSONPostRefused(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	call := polCall(1, "echo")
	for name, mod := range map[string]func(*setup){
		"plain":       nil,
		"tool policy": func(c *setup) { c.Tools, c.ToolDefault = polTools(), "allow" },
		"proof off":   func(c *setup) { c.RequestProof = "off" },
	} {
		h := f.handler(t, mod)
		for _, tc := range []struct {
			method string
			ct     []string
			tok    string
		}{
			{"POST", []string{"text/plain"}, tok},
			{"POST", []string{"application/x-www-form-urlencoded"}, tok},
			{"POST", nil, tok},
			{"POST", []string{"application/jsonx"}, tok},
			{"POST", []string{"application/json", "text/plain"}, tok},
			{"post", []string{"text/plain"}, tok},
			{"POST", []string{"text/plain"}, ""}, // before the 401
		} {
			what := name + ", " + tc.method + " " + strings.Join(tc.ct, ",") + ", credential " + strconv.FormatBool(tc.tok != "")
			r := polPost(call, tc.tok)
			r.Method = tc.method
			r.Header["Content-Type"] = tc.ct
			res := polServe(t, h, r, nil)
			rtNotForwarded(t, res, what)
			code, msg := rpcError(t, res.rec)
			if res.rec.Code != http.StatusUnsupportedMediaType || code != mcp.CodeInvalidRequest || !strings.Contains(msg, "Content-Type: application/json") {
				t.Errorf("%s: HTTP %d %d %q, want 415 asking for Content-Type: application/json", what, res.rec.Code, code, msg)
			}
		}
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.example+json"} {
			r := polPost(call, tok)
			r.Header.Set("Content-Type", ct)
			if res := polServe(t, h, r, nil); !res.called {
				t.Errorf("%s, %s: HTTP %d %s", name, ct, res.rec.Code, res.rec.Body)
			}
		}
		for _, r := range []*http.Request{newRequest(http.MethodPost, "/mcp", ""), newRequest(http.MethodGet, "/mcp", ""), newRequest(http.MethodDelete, "/mcp", "")} {
			r.Header.Set("Authorization", "Bearer "+tok)
			if res := polServe(t, h, r, nil); !res.called {
				t.Errorf("%s, bodiless %s: HTTP %d %s", name, r.Method, res.rec.Code, res.rec.Body)
			}
		}
	}
}

// TestOversizeAnswerNamesLimit: an answer the edge must check and withholds
// for its size, as JSON or as one SSE event, is replaced by a JSON-RPC
// error naming max_response_size and the limit.
func TestOversizeAnswerNamesLimit(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) { c.Tools, c.ToolDefault, c.MaxResponseSize = polTools(), "allow", 256 })
	tok := f.jwt(t, nil)
	big := `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo","description":"` + strings.Repeat("x", 400) + `"}]}}`
	for _, sse := range []bool{false, true} {
		res := polServe(t, h, polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, tok), func(w http.ResponseWriter, _ *http.Request) {
			if sse {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("data: " + big + "\n\n"))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(big))
		})
		if body := res.rec.Body.String(); strings.Contains(body, "xxxx") || !strings.Contains(body, "max_response_size (256 bytes)") {
			t.Errorf("SSE %t: HTTP %d %s, want an error naming max_response_size (256 bytes)", sse, res.rec.Code, body)
		}
	}
}
