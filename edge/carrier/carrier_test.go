package carrier

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash/maphash"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// fakeJWT builds an unsigned compact JWS; classification never checks the
// signature.
func fakeJWT(header, payload string) string {
	e := base64.RawURLEncoding.EncodeToString
	return e([]byte(header)) + "." + e([]byte(payload)) + ".c2ln"
}

func TestIsDelegationJWT(t *testing.T) {
	tests := []struct {
		name string
		tok  string
		want bool
	}{
		{"vc claim", fakeJWT(`{"alg":"EdDSA","typ":"JWT"}`, `{"iss":"did:key:z","vc":{}}`), true},
		{"vp claim", fakeJWT(`{"alg":"EdDSA"}`, `{"vp":{}}`), true},
		{"typ vc+jwt", fakeJWT(`{"alg":"EdDSA","typ":"vc+jwt"}`, `{"@context":[]}`), true},
		{"typ application/vp+jwt", fakeJWT(`{"alg":"EdDSA","typ":"application/vp+jwt"}`, `{}`), true},
		{"oauth access token", fakeJWT(`{"alg":"RS256","typ":"at+jwt"}`, `{"sub":"alice","scope":"read"}`), false},
		{"VC member in other case is vc, as encoding/json reads it", fakeJWT(`{"alg":"EdDSA"}`, `{"VC":{}}`), true},
		{"opaque", "gho_16C7e42F292c6912E7710c838347Ae178B4a", false},
		{"two parts", "abc.def", false},
		{"four parts", "a.b.c.d", false},
		// Three segments the edge cannot strictly read are ours: vc
		// refuses them, never the upstream's lenient JWT library.
		{"bad base64", "!!!.???.x", true},
		{"payload not json", "e30." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".x", true},
		{"empty segments", "..", true},
		{"std base64 payload", "e30." + base64.RawStdEncoding.EncodeToString([]byte(`{"sub":"a?>>"}`)) + ".x", true},
		{"padded payload", "e30." + base64.URLEncoding.EncodeToString([]byte(`{"a":1}`)) + ".x", true},
		{"BOM before the payload", fakeJWT(`{"alg":"RS256"}`, "\xef\xbb\xbf"+`{"sub":"alice"}`), true},
		{"NaN in the payload", fakeJWT(`{"alg":"RS256"}`, `{"sub":"alice","n":NaN}`), true},
		{"header not an object", fakeJWT(`["typ"]`, `{"sub":"alice"}`), true},
		{"typ not a string", fakeJWT(`{"alg":"RS256","typ":1}`, `{"sub":"alice"}`), true},
		{"typ vc+jwt, then JWT", fakeJWT(`{"typ":"vc+jwt","typ":"JWT"}`, `{"sub":"alice"}`), true},
		// VC 2.0 and the +ld+jwt typs, as vc reads them.
		{"typ vc+ld+jwt", fakeJWT(`{"alg":"EdDSA","typ":"vc+ld+jwt"}`, `{}`), true},
		{"typ Application/VP+LD+JWT", fakeJWT(`{"alg":"EdDSA","typ":"Application/VP+LD+JWT"}`, `{}`), true},
		{"VC 2.0 payload, typ JWT", fakeJWT(`{"alg":"EdDSA","typ":"JWT"}`, `{"@context":["https://www.w3.org/ns/credentials/v2"],"type":["VerifiableCredential"]}`), true},
		{"VC 2.0 payload, no typ", fakeJWT(`{"alg":"EdDSA"}`, `{"@CONTEXT":[],"type":"x"}`), true},
		{"oauth id token", fakeJWT(`{"alg":"RS256","kid":"k1","typ":"JWT"}`, `{"iss":"https://idp.example","sub":"alice","aud":"x","exp":1}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isDelegationJWT(tt.tok); got != tt.want {
				t.Errorf("isDelegationJWT = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	tests := []struct {
		in, tok string
		ok      bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer  abc ", "abc", true},
		{"BEARER\tabc", "abc", true},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearerabc", "", false},
		{"Bearer", "", true},
		{"DPoP abc", "", false},
	}
	for _, tt := range tests {
		tok, ok := bearerToken(tt.in)
		if tok != tt.tok || ok != tt.ok {
			t.Errorf("bearerToken(%q) = %q, %v; want %q, %v", tt.in, tok, ok, tt.tok, tt.ok)
		}
	}
}

func TestStripIdentityHeaders(t *testing.T) {
	h := http.Header{}
	spoofed := []string{
		"X-Agent-Did", "X-User-Did", "X-Agent-Reputation-Score", "X-Verified-Delegation",
		"X_agent_did", "X_Agent_DID", "x-user-did", "Kya-Os-Agent-Did", "Kya-Os-Delegation-Proof",
		"Kya_delegation", "Kya-Anything", "Mcp_i_credential", "MCP_I_Delegation",
	}
	kept := []string{
		"Authorization", "Kya-Delegation", "Kya-Os-Delegation-Credential", "Mcp-I-Credential",
		"Mcp-I-Delegation", "Content-Type", "X-Agent", "X-Request-Id", "Mcp-Session-Id", "Kyb",
	}
	for _, k := range append(append([]string{}, spoofed...), kept...) {
		h[k] = []string{"v"} // raw keys: Go keeps X_Agent_DID as sent
	}
	stripIdentityHeaders(h, All)
	for _, k := range spoofed {
		if _, ok := h[k]; ok {
			t.Errorf("%s not stripped", k)
		}
	}
	for _, k := range kept {
		if _, ok := h[k]; !ok {
			t.Errorf("%s stripped", k)
		}
	}

	// A KYA-* carrier switched off is just another KYA-* header.
	h = http.Header{"Kya-Delegation": {"v"}, "Kya-Os-Delegation-Credential": {"v"}, "Mcp-I-Credential": {"v"}}
	stripIdentityHeaders(h, Of(Authorization))
	if _, ok := h["Kya-Delegation"]; ok {
		t.Error("disabled Kya-Delegation not stripped")
	}
	if _, ok := h["Kya-Os-Delegation-Credential"]; ok {
		t.Error("disabled Kya-Os-Delegation-Credential not stripped")
	}
	if _, ok := h["Mcp-I-Credential"]; !ok {
		t.Error("disabled Mcp-I-Credential must be ignored, not stripped")
	}
}

func rawOf(found []Credential) []string {
	var out []string
	for _, p := range found {
		out = append(out, p.Carrier.String()+"="+string(p.Raw))
	}
	return out
}

func TestExtractBody(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		found    []string
		stripped string // "" = unchanged
	}{
		{
			name:     "delegationToken",
			body:     `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","delegationToken":"T1","arguments":{"a":1}}}`,
			found:    []string{"delegation_token=T1"},
			stripped: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1}}}`,
		},
		{
			name:     "delegationToken first and only",
			body:     "{\"method\":\"initialize\",\"params\":{ \"delegationToken\" : \"T1\" } }",
			found:    []string{"delegation_token=T1"},
			stripped: "{\"method\":\"initialize\",\"params\":{} }",
		},
		{
			name:     "mcpi_delegation object",
			body:     `{"method":"tools/call","params":{"name":"x","arguments":{"_mcpi_delegation":{"id":"urn:1","proof":{"p":"v"}},"q":"s"}}}`,
			found:    []string{`mcpi_delegation={"id":"urn:1","proof":{"p":"v"}}`},
			stripped: `{"method":"tools/call","params":{"name":"x","arguments":{"q":"s"}}}`,
		},
		{
			name:     "mcpi_delegation string",
			body:     `{"method":"tools/call","params":{"arguments":{"_mcpi_delegation":"T2"}}}`,
			found:    []string{"mcpi_delegation=T2"},
			stripped: `{"method":"tools/call","params":{"arguments":{}}}`,
		},
		{
			name:  "mcpi_delegation outside tools/call is not a carrier",
			body:  `{"method":"prompts/get","params":{"arguments":{"_mcpi_delegation":"T2"}}}`,
			found: nil,
		},
		{
			name: "batch",
			body: `[{"method":"tools/call","params":{"delegationToken":"T1","arguments":{"_mcpi_delegation":"T1"}}}, 7, {"method":"ping"},` +
				`{"method":"tools/list","params":{"delegationToken":"T1"}}]`,
			found:    []string{"delegation_token=T1", "mcpi_delegation=T1", "delegation_token=T1"},
			stripped: `[{"method":"tools/call","params":{"arguments":{}}}, 7, {"method":"ping"},{"method":"tools/list","params":{}}]`,
		},
		{
			name:     "case variants and escapes are carriers too",
			body:     `{"METHOD":"tools/call","Params":{"DelegationToken":"A","delegation\u0054oken":"B","ARGUMENTS":{"_MCPI_DELEGATION":"C"}}}`,
			found:    []string{"delegation_token=A", "delegation_token=B", "mcpi_delegation=C"},
			stripped: `{"METHOD":"tools/call","Params":{"ARGUMENTS":{}}}`,
		},
		{
			name:     "duplicate keys are all read",
			body:     `{"params":{"delegationToken":"A","delegationToken":"B"}}`,
			found:    []string{"delegation_token=A", "delegation_token=B"},
			stripped: `{"params":{}}`,
		},
		{
			name:     "escaped string value is decoded",
			body:     `{"params":{"delegationToken":"a\u002eb\/c"}}`,
			found:    []string{"delegation_token=a.b/c"},
			stripped: `{"params":{}}`,
		},
		{
			name:  "null is absent",
			body:  `{"params":{"delegationToken":null}}`,
			found: nil,
		},
		{
			name:     "number is presented (and fails verification)",
			body:     `{"params":{"delegationToken":12}}`,
			found:    []string{"delegation_token=12"},
			stripped: `{"params":{}}`,
		},
		{name: "params not an object", body: `{"params":["delegationToken","x"]}`},
		{name: "nested deeper is not a carrier", body: `{"params":{"meta":{"delegationToken":"x"}}}`},
		{name: "invalid JSON", body: `{"params":{"delegationToken":"x"}`},
		{name: "cut off in a carrier", body: `{"METHOD":"tools/call","PArAms":{"ARGUMENTS":{"_MCPI_DELEGATION":`},
		{name: "trailing garbage", body: `{"params":{"delegationToken":"x"}} x`},
		{name: "string top level", body: `"delegationToken"`},
		{name: "empty", body: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found, stripped, _ := scanBody([]byte(tt.body), All, true)
			if got := rawOf(found); !reflect.DeepEqual(got, tt.found) {
				t.Errorf("found %q, want %q", got, tt.found)
			}
			if tt.stripped == "" {
				if stripped != nil {
					t.Errorf("stripped = %s, want unchanged", stripped)
				}
				return
			}
			if string(stripped) != tt.stripped {
				t.Errorf("stripped:\n got %s\nwant %s", stripped, tt.stripped)
			}
			// Without strip, nothing is rewritten.
			if _, s, _ := scanBody([]byte(tt.body), All, false); s != nil {
				t.Errorf("strip=false rewrote the body")
			}
		})
	}
}

func TestExtractBodyDisabledCarrier(t *testing.T) {
	body := `{"method":"tools/call","params":{"delegationToken":"A","arguments":{"_mcpi_delegation":"B"}}}`
	found, stripped, _ := scanBody([]byte(body), Of(MCPIDelegation), true)
	if got := rawOf(found); !reflect.DeepEqual(got, []string{"mcpi_delegation=B"}) {
		t.Errorf("found %q", got)
	}
	if want := `{"method":"tools/call","params":{"delegationToken":"A","arguments":{}}}`; string(stripped) != want {
		t.Errorf("stripped %s", stripped)
	}
}

func TestConflicting(t *testing.T) {
	p := func(s string) Credential { return Credential{Carrier: Authorization, Raw: []byte(s)} }
	tests := []struct {
		name  string
		found []Credential
		want  bool
	}{
		{"one", []Credential{p("a")}, false},
		{"same after trim", []Credential{p("a.b.c"), p(" a.b.c\n")}, false},
		{"different", []Credential{p("a.b.c"), p("a.b.d")}, true},
		{"same JSON VC, other layout", []Credential{p(`{"id":"x","proof":{"v":1}}`), p(`{ "proof": {"v": 1}, "id": "x" }`)}, false},
		{"different JSON VC", []Credential{p(`{"id":"x"}`), p(`{"id":"y"}`)}, true},
		{"JWT vs JSON", []Credential{p(`a.b.c`), p(`{"id":"x"}`)}, true},
	}
	for _, tt := range tests {
		if got := (&Found{Credentials: tt.found}).Conflicting(); got != tt.want {
			t.Errorf("%s: conflicting = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestIsJSONContentType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                  true,
		"application/json; charset=utf-8":   true,
		"APPLICATION/JSON":                  true,
		"application/vnd.api+json":          true,
		"text/event-stream":                 false,
		"text/plain":                        false,
		"":                                  false,
		"application/x-www-form-urlencoded": false,
		// Parameters do not matter, even malformed or repeated ones: a
		// JSON-RPC server reads the body as JSON all the same.
		"application/json; charset":      true,
		"application/json; a=1; a=2":     true,
		"application/json;;":             true,
		" application/json ; x=\"y\"":    true,
		"application/json/x":             false,
		"application/":                   false,
		"application/js on":              false,
		"appl\u0130cation/json":          true, // as mime lower-cases it
		"application/json\u00a0; x=1":    true,
		"application/vnd.x+json; q=\x00": true,
	} {
		if got := isJSONContentType(ct); got != want {
			t.Errorf("isJSONContentType(%q) = %v", ct, got)
		}
	}
}

// mediaType must give mime.ParseMediaType's media type, whatever follows
// the first ';'.
func TestMediaType(t *testing.T) {
	for _, ct := range []string{
		"application/json", "Application/JSON; charset=utf-8", "text/event-stream", " text/plain ",
		"a", "a/", "/b", "a/b/c", "a b/c", "a/b c", "a\x00/b", "a/b\x7f", "(a)/b", "a/[b]", "",
		"appl\u0130cation/json", "\u212avc/json", "application/json\u00a0", "\u0085text/plain",
		"application/json; a=1; a=2", "x/y;", "Ä/b",
	} {
		base, _, _ := strings.Cut(ct, ";")
		want, _, err := mime.ParseMediaType(base)
		if err != nil {
			want = ""
		}
		if got := MediaType(ct); got != want {
			t.Errorf("mediaType(%q) = %q, mime says %q", ct, got, want)
		}
	}
}

// failReader fails the test when anything reads it: GET bodies and SSE
// streams must never be touched.
type failReader struct{ t *testing.T }

func (f failReader) Read([]byte) (int, error) {
	f.t.Error("body was read")
	return 0, io.EOF
}

func TestExtractDoesNotReadNonJSONOrGET(t *testing.T) {
	for _, r := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/mcp", nil),
		httptest.NewRequest(http.MethodPost, "/mcp", nil),
		httptest.NewRequest(http.MethodPut, "/mcp", nil),
	} {
		r.Body = io.NopCloser(failReader{t})
		r.ContentLength = -1
		if r.Method != http.MethodPost {
			r.Header.Set("Content-Type", "application/json")
		} else {
			r.Header.Set("Content-Type", "text/event-stream")
		}
		if _, err := New(Config{Enabled: All, MaxBody: 1 << 20}).Find(httptest.NewRecorder(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExtractRestoresBody(t *testing.T) {
	body := "{ \"jsonrpc\": \"2.0\",\n  \"method\": \"tools/call\", \"params\": {\"name\": \"x\"} }\n"
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	f, err := New(Config{Enabled: All, MaxBody: 1 << 20}).Find(httptest.NewRecorder(), r)
	if err != nil || len(f.Credentials) != 0 || f.stripped != nil {
		t.Fatalf("Find: %v %v %s", err, f.Credentials, f.stripped)
	}
	got, _ := io.ReadAll(r.Body)
	if string(got) != body {
		t.Errorf("body changed: %q", got)
	}
}

func TestExtractBodyTooLarge(t *testing.T) {
	big := `{"params":{"x":"` + strings.Repeat("a", 2000) + `"}}`
	for _, cl := range []int64{int64(len(big)), -1} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(big))
		r.Header.Set("Content-Type", "application/json")
		r.ContentLength = cl
		if _, err := New(Config{Enabled: All, MaxBody: 1024}).Find(httptest.NewRecorder(), r); err != ErrBodyTooLarge {
			t.Errorf("content-length %d: err = %v, want ErrBodyTooLarge", cl, err)
		}
	}
}

func TestRemoveCarriersFixesContentLength(t *testing.T) {
	body := `{"method":"tools/call","params":{"delegationToken":"T","name":"x"}}`
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Content-Length", "66")
	r.Header.Set("Authorization", "Bearer opaque-oauth-token")
	r.Header.Set("Kya-Delegation", "T")
	r.Header.Set("Mcp-I-Delegation", "urn:1")
	rd := New(Config{Enabled: All, MaxBody: 1 << 20})
	f, err := rd.Find(httptest.NewRecorder(), r)
	if err != nil {
		t.Fatal(err)
	}
	rd.Remove(r, f)
	got, _ := io.ReadAll(r.Body)
	want := `{"method":"tools/call","params":{"name":"x"}}`
	if string(got) != want {
		t.Errorf("body %s", got)
	}
	if r.ContentLength != int64(len(want)) || r.Header.Get("Content-Length") != strconv.Itoa(len(want)) {
		t.Errorf("content length %d / %q", r.ContentLength, r.Header.Get("Content-Length"))
	}
	if r.Header.Get("Authorization") != "Bearer opaque-oauth-token" {
		t.Error("foreign bearer removed")
	}
	if r.Header.Get("Kya-Delegation") != "" || r.Header.Get("Mcp-I-Delegation") != "" {
		t.Error("carrier headers kept")
	}
}

// referenceStrip is an independent model of scanBody, through
// encoding/json, used to check the hand-written scanner.
func referenceStrip(v any) (any, int) {
	n := 0
	stripParams := func(params map[string]any, toolsCall bool) {
		for k, val := range params {
			if strings.EqualFold(k, "delegationToken") && val != nil {
				delete(params, k)
				n++
			}
			if args, ok := val.(map[string]any); ok && toolsCall && strings.EqualFold(k, "arguments") {
				for ak, av := range args {
					if strings.EqualFold(ak, "_mcpi_delegation") && av != nil {
						delete(args, ak)
						n++
					}
				}
			}
		}
	}
	msg := func(m map[string]any) {
		toolsCall := false
		for k, val := range m {
			if s, ok := val.(string); ok && strings.EqualFold(k, "method") && s == "tools/call" {
				toolsCall = true
			}
		}
		for k, val := range m {
			if p, ok := val.(map[string]any); ok && strings.EqualFold(k, "params") {
				stripParams(p, toolsCall)
			}
		}
	}
	switch x := v.(type) {
	case map[string]any:
		msg(x)
	case []any:
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				msg(m)
			}
		}
	}
	return v, n
}

// hasDuplicateKeys: the reference model (Go maps) cannot represent them.
func hasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	var stack []map[string]bool
	expectKey := []bool{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, map[string]bool{})
			expectKey = append(expectKey, true)
			continue
		case json.Delim('['):
			stack = append(stack, nil)
			expectKey = append(expectKey, false)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			expectKey = expectKey[:len(expectKey)-1]
		default:
			if n := len(stack); n > 0 && stack[n-1] != nil && expectKey[n-1] {
				k := tok.(string)
				if stack[n-1][k] {
					return true
				}
				stack[n-1][k] = true
				expectKey[n-1] = false
				continue
			}
		}
		if n := len(stack); n > 0 && stack[n-1] != nil {
			expectKey[n-1] = true
		}
	}
}

func decodeAny(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func FuzzExtractCarriers(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","delegationToken":"T1","arguments":{"_mcpi_delegation":{"id":"u","proof":{}},"a":[1,{"b":"}"}]}}}`,
		`[{"method":"tools/call","params":{"delegationToken":"T1"}},{"method":"tools/call","params":{"arguments":{"_mcpi_delegation":"T1"}}}]`,
		`{"METHOD":"tools/call","Params":{"DelegationToken":"A","delegation\u0054oken":"B","ARGUMENTS":{"_MCPI_DELEGATION":"C"}}}`,
		`{"params":{"delegationToken":"A","delegationToken":"B"}}`,
		`{"params":{"delegationToken":null,"x":"\"\\"}}`,
		` [ 1 , "a" , { } , [ ] , {"params" : { "delegationToken" : 1e3 } } ] `,
		`{"params":{"delegationToken":"x"}`,
		`{}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		found, stripped, ok := scanBody(body, All, true)
		if ok != json.Valid(body) {
			t.Fatalf("scanBody says valid %v", ok)
		}
		if !ok {
			if found != nil || stripped != nil {
				t.Fatalf("carriers found in invalid JSON")
			}
			return
		}
		if (len(found) > 0) != (stripped != nil) {
			t.Fatalf("found %d carriers but stripped=%v", len(found), stripped != nil)
		}
		if stripped == nil {
			stripped = body
		}
		if !json.Valid(stripped) {
			t.Fatalf("stripped body is not JSON: %q", stripped)
		}
		if again, s, _ := scanBody(stripped, All, true); len(again) != 0 || s != nil {
			t.Fatalf("carriers left after stripping: %q", rawOf(again))
		}
		if _, s, _ := scanBody(body, All, false); s != nil {
			t.Fatalf("strip=false rewrote the body")
		}
		if hasDuplicateKeys(body) {
			return
		}
		orig, err := decodeAny(body)
		if err != nil {
			t.Fatal(err)
		}
		want, n := referenceStrip(orig)
		if n != len(found) {
			t.Fatalf("found %d carriers, reference %d", len(found), n)
		}
		got, err := decodeAny(stripped)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("stripped body differs from reference:\n got %#v\nwant %#v", got, want)
		}
	})
}

// isForeignPayload must agree with decoding the object into a map and
// looking the names up as encoding/json matches a field (case folded),
// which is what it replaces on the hot path.
func TestIsForeignPayload(t *testing.T) {
	for _, in := range []string{
		`{"vc":{}}`, `{"vp":1}`, `{"a":1,"vc":null}`, `{"a":{"vc":1}}`, `{"a":["vc"]}`,
		`{"VC":1}`, `{"Vp":1}`, `{"v\u0063":1}`, `{}`, `[]`, `"vc"`, `{"vc":1`, `{"a":"}","vc":2}`,
		` { "x" : [1,{"vp":2}] , "vp" : true } `, `{"vcx":1}`, `null`, ``,
		`{"@context":[]}`, `{"@CONTEXT":1}`, `{"\u0040context":1}`, `{"context":1}`, `{"a":{"@context":1}}`,
		"\xef\xbb\xbf{}", `{"a":NaN}`, `{"sub":"alice","scope":"read"}`,
	} {
		want := isForeignPayloadRef([]byte(in))
		if got := isForeignPayload([]byte(in)); got != want {
			t.Errorf("isForeignPayload(%s) = %v, want %v", in, got, want)
		}
	}
}

// isForeignPayloadRef is what isForeignPayload must agree with: an object
// encoding/json decodes, without a member that folds to vc, vp or @context.
func isForeignPayloadRef(in []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(in, &m) != nil || m == nil {
		return false
	}
	for k := range m {
		if strings.EqualFold(k, "vc") || strings.EqualFold(k, "vp") || strings.EqualFold(k, "@context") {
			return false
		}
	}
	return true
}

// The scanner validates as it goes: every way of being malformed, and the
// nesting limit of encoding/json, must give the map decode's answer.
func TestIsForeignPayloadMalformed(t *testing.T) {
	in := []string{
		`{"vc":1}x`, `{"vc":1}}`, `{"vc":01}`, `{"vc":-}`, `{"vc":1.}`, `{"vc":1e}`, `{"vc":1e+}`,
		`{"vc":-0.5e-3}`, `{"vc":tru}`, `{"vc":truex}`, `{"vc":nul}`, `{"vc":"\x}`, `{"vc":"\u12g4"}`,
		`{"vc":"\u12"}`, "{\"vc\":\"a\x01\"}", "{\"vc\":\"\xff\"}", `{"vc":[1,]}`, `{"vc":[,1]}`,
		`{"vc":{"a"}}`, `{"vc":{"a":}}`, `{"vc":{,}}`, `{"vc":1,}`, `{,"vc":1}`, `{"vc" 1}`, `{vc:1}`,
		`{"vc":1 "vp":2}`, `{"a":1,"vc":[`, `{"vc":"`, `{"vc":"\`, `{"vc":"\u`, `{"vc`, `{`, `{"vc":+1}`,
		`{"vc":.5}`, `{"vc":1.5E+10}`, `{"vc":[true,false,null,{},[],""]}`, "\t{\"vp\"\n:\r1 }\n",
		`{"v\u0063":1,"a":[}`, `{"a":[}],"vc":1}`, `{"vc":1}` + "\x00", `{"\u0076p":null}`,
		`{"vc":{"x":"}"}, "y":]}`, `{"a":"\"","vc":2}`, `{"vc":"\/\b\f\n\r\t\\\""}`,
	}
	const maxJSONDepth = 10000 // encoding/json's nesting limit
	for _, depth := range []int{maxJSONDepth - 1, maxJSONDepth, maxJSONDepth + 1} {
		// The top-level object is one level: depth levels in all.
		in = append(in, `{"vc":`+strings.Repeat("[", depth-1)+strings.Repeat("]", depth-1)+`}`)
		in = append(in, `{"vc":1,"a":`+strings.Repeat(`{"a":`, depth-1)+"1"+strings.Repeat("}", depth-1)+`}`)
	}
	for _, s := range in {
		want := isForeignPayloadRef([]byte(s))
		if got := isForeignPayload([]byte(s)); got != want {
			t.Errorf("isForeignPayload(%.80q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzIsForeignPayload(f *testing.F) {
	for _, s := range []string{
		`{"vc":{}}`, `{"vp":1}`, `{"a":1,"vc":null}`, `{"a":{"vc":1}}`, `{"a":["vc"]}`, `{"VC":1}`,
		`{"v\u0063":1}`, `{}`, `[]`, `"vc"`, `{"vc":1`, `{"a":"}","vc":2}`, `{"vcx":1}`, `null`, ``,
		` { "x" : [1,{"vp":2}] , "vp" : true } `, `{"vc":-1.5e+3,"b":[true,false,null]}`,
		`{"vc":"\ud800\"x"}`, `{"vc":01}`, `{"vc":1}x`, `{"vp":[1,]}`, "{\"vc\":\"\x01\"}",
		`{"iss":"did:key:z6Mk","vc":{"@context":["https://www.w3.org/2018/credentials/v1"],"type":["VerifiableCredential"]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if got, want := isForeignPayload(in), isForeignPayloadRef(in); got != want {
			t.Errorf("isForeignPayload(%q) = %v, want %v", in, got, want)
		}
	})
}

// isDelegationJWTRef is what isDelegationJWT must agree with, by
// encoding/json: a three-segment token is foreign only if both segments
// are strict base64url, the header an object that decodes into
// struct{ Typ string } with no typ member vc takes for a credential's, and
// the payload an object without a vc, vp or @context member.
func isDelegationJWTRef(tok string) bool {
	h, rest, ok := strings.Cut(tok, ".")
	if !ok {
		return false
	}
	p, sig, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(sig, ".") {
		return false
	}
	hb, err := strictSegment(h)
	if err != nil || !isForeignHeaderRef(hb) {
		return true
	}
	pb, err := strictSegment(p)
	return err != nil || !isForeignPayloadRef(pb)
}

// strictSegment decodes unpadded base64url, and nothing else: the decoder
// alone would skip line breaks.
func strictSegment(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("line break in a segment")
	}
	return base64.RawURLEncoding.Strict().DecodeString(s)
}

// isForeignHeaderRef: hb is an object encoding/json reads into
// struct{ Typ string }, and none of its typ members (duplicates too) is
// a typ vc reads as a credential's.
func isForeignHeaderRef(hb []byte) bool {
	var header struct {
		Typ string `json:"typ"`
	}
	if t := bytes.TrimLeft(hb, " \t\r\n"); len(t) == 0 || t[0] != '{' || json.Unmarshal(hb, &header) != nil {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(hb))
	if _, err := dec.Token(); err != nil {
		panic(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			panic(err)
		}
		var v *string
		if err := dec.Decode(&v); err != nil {
			if strings.EqualFold(k.(string), "typ") {
				panic(err)
			}
			continue
		}
		if strings.EqualFold(k.(string), "typ") && v != nil && vc.IsCredentialTyp(*v) {
			return false
		}
	}
	return true
}

// isDelegationJWTCases are headers and payloads on which isDelegationJWT
// and isDelegationJWTRef must agree, chosen for the ways encoding/json
// reads a struct field: any case of the key, escapes, the last of
// duplicates, null, other types, Unicode letters whose lower case is ASCII.
var isDelegationJWTCases = [][2]string{
	{`{"alg":"EdDSA","typ":"JWT"}`, `{"iss":"did:key:z","vc":{}}`},
	{`{"typ":"vc+jwt"}`, `{}`},
	{`{"alg":"EdDSA"}`, `{"VC":{}}`},
	{`{"alg":"EdDSA"}`, `{"vP":{}}`},
	{`{"alg":"EdDSA"}`, `{"\u0056C":{}}`},
	{`{"TYP":"VC+JWT"}`, `{}`},
	{`{"Typ":"Application/VP+JWT"}`, `{}`},
	{`{"t\u0079p":"vc\u002bjwt"}`, `{}`},
	{`{"typ":"vc+jwt","typ":null}`, `{}`},
	{`{"typ":"vc+jwt","typ":"JWT"}`, `{}`},
	{`{"typ":"JWT","typ":"vc+jwt"}`, `{}`},
	{`{"typ":1,"typ":"vc+jwt"}`, `{}`},
	{`{"typ":"vc+jwt","x":[1,2}`, `{}`},
	{`{"typ":["vc+jwt"]}`, `{"vp":1}`},
	{`{"typ":{"a":"x","typ":"vc+jwt"}}`, `{}`},
	{`{"typ":"appl` + "\u0130" + `cation/vc+jwt"}`, `{}`},
	{`{"typ":"vc+jwt` + "\u212a" + `"}`, `{}`},
	{`{"typ":"vc+jwt\u0000"}`, `{}`},
	{`{"typ":"` + "\xff" + `vc+jwt"}`, `{}`},
	{`{"typ":"application/vc+jwt"} `, `{}`},
	{`["typ","vc+jwt"]`, `{"vc":1}`},
	{`null`, `null`},
	{`{"typ":"at+jwt"}`, `{"sub":"alice","scope":"read"}`},
	{`{}`, `{"v\u0063":1}`},
	{`{}`, `{"vc":1}x`},
	{`{}`, `[{"vc":1}]`},
	{`{}`, `{"a":{"vc":1},"b":[{"vp":2}]}`},
	{`{"typ":"vc+ld+jwt"}`, `{}`},
	{`{"typ":"application/VP+LD+JWT"}`, `{}`},
	{`{"typ":"JWT"}`, `{"@context":[],"type":[]}`},
	{`{}`, `{"@Context":1}`},
	{`{}`, `{"\u0040context":1}`},
	{`{"typ":"vc+jwt","typ":"JWT"}`, `{"sub":"a"}`},
	{`{"typ":"JWT","typ":null}`, `{"sub":"a"}`},
	{`{"alg":1}`, `{"sub":"a"}`},
	{`{}`, "\xef\xbb\xbf{}"},
	{"\xef\xbb\xbf{}", `{}`},
	{`{}`, `{"n":NaN}`},
	{`{}`, ``},
	{``, `{}`},
}

func TestIsDelegationJWTAgreesWithDecoding(t *testing.T) {
	for _, c := range isDelegationJWTCases {
		tok := fakeJWT(c[0], c[1])
		if got, want := isDelegationJWT(tok), isDelegationJWTRef(tok); got != want {
			t.Errorf("isDelegationJWT(%s . %s) = %v, decoding says %v", c[0], c[1], got, want)
		}
	}
	// Segments that are not base64url, padded ones, and line breaks, which
	// the base64 decoder skips.
	e := base64.RawURLEncoding.EncodeToString
	vcTyp := e([]byte(`{"typ":"vc+jwt"}`))
	for _, tok := range []string{
		vcTyp + "==.e30.x", vcTyp + ".e30=.x", vcTyp[:5] + "\n" + vcTyp[5:] + ".e30.x",
		"e30." + e([]byte(`{"vc":1}`))[:3] + ".x", "!!.e30.x", vcTyp + "..", ".." + vcTyp, vcTyp + ".e30.x.y",
	} {
		if got, want := isDelegationJWT(tok), isDelegationJWTRef(tok); got != want {
			t.Errorf("isDelegationJWT(%q) = %v, decoding says %v", tok, got, want)
		}
	}
}

func FuzzIsDelegationJWT(f *testing.F) {
	for _, c := range isDelegationJWTCases {
		f.Add([]byte(c[0]), []byte(c[1]), "")
	}
	f.Add([]byte(nil), []byte(nil), "e30.e30.x")
	f.Add([]byte(nil), []byte(nil), "gho_16C7e42F292c6912E7710c838347Ae178B4a")
	f.Fuzz(func(t *testing.T, header, payload []byte, raw string) {
		e := base64.RawURLEncoding.EncodeToString
		for _, tok := range []string{e(header) + "." + e(payload) + ".c2ln", raw} {
			if got, want := isDelegationJWT(tok), isDelegationJWTRef(tok); got != want {
				t.Errorf("isDelegationJWT(%q) = %v, decoding says %v", tok, got, want)
			}
		}
	})
}

// readAll reads bodies shorter, longer and as long as announced, and bodies
// larger than what it allocates up front.
func TestReadAll(t *testing.T) {
	for _, c := range []struct {
		n    int
		size int64
	}{{0, 0}, {10, 10}, {10, 5}, {10, 20}, {10, -1}, {maxPrealloc + 5000, maxPrealloc + 5000}, {3 * maxPrealloc, 3 * maxPrealloc}} {
		want := bytes.Repeat([]byte("abcdefgh"), c.n/8+1)[:c.n]
		got, err := readAll(iotest.HalfReader(bytes.NewReader(want)), c.size, int64(c.n))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("readAll of %d bytes announced as %d: %d bytes, %v", c.n, c.size, len(got), err)
		}
		if c.n > 0 {
			if _, err := readAll(bytes.NewReader(want), c.size, int64(c.n-1)); err != ErrBodyTooLarge {
				t.Errorf("readAll of %d bytes, at most %d: %v", c.n, c.n-1, err)
			}
		}
	}
	if _, err := readAll(iotest.ErrReader(io.ErrUnexpectedEOF), 10, 100); err != io.ErrUnexpectedEOF {
		t.Errorf("read error: %v", err)
	}
}

// The memo answers as isDelegationJWT does, the first time and after, and
// remembers delegations only.
func TestBearerMemo(t *testing.T) {
	m := newBearerMemo()
	slots := map[uint64]bool{} // of the delegations: two may share one
	for round := range 2 {
		for _, c := range isDelegationJWTCases {
			tok := fakeJWT(c[0], c[1])
			ours := isDelegationJWT(tok)
			if ours {
				slots[(maphash.String(m.seed, tok)|1)%bearerMemoSlots] = true
			}
			if got := m.isDelegation(tok); got != ours {
				t.Errorf("round %d: memo says %v for %s . %s", round, got, c[0], c[1])
			}
		}
	}
	used := 0
	for i := range m.slots {
		if m.slots[i].Load() != 0 {
			used++
		}
	}
	if want := len(slots); used != want {
		t.Errorf("%d slots used, want %d: one per delegation, none for other tokens", used, want)
	}
	if (*bearerMemo)(nil).isDelegation(fakeJWT(`{"typ":"vc+jwt"}`, `{}`)) != true {
		t.Error("nil memo")
	}
}

// The carrier headers are read and deleted by their names as map keys, so
// the names must be canonical.
func TestCarrierHeaderNamesCanonical(t *testing.T) {
	names := []string{hdrAuthorization, hdrMCPIDelegation, hdrDelegationChain}
	for _, hc := range headerCarriers {
		names = append(names, hc.name)
	}
	for _, n := range names {
		if c := http.CanonicalHeaderKey(n); c != n {
			t.Errorf("%q is not canonical (%q)", n, c)
		}
	}
}

// isIdentityHeaderRef is what isIdentityHeader must agree with: the name
// lower-cased with "_" and "." read as "-", then compared.
func isIdentityHeaderRef(k string, enabled Set) bool {
	if len(k) < 4 {
		return false
	}
	switch k[0] {
	case 'x', 'X', 'k', 'K', 'm', 'M':
	default:
		return false
	}
	switch k {
	case hdrKYADelegation:
		if enabled.Has(KYADelegation) {
			return false
		}
	case hdrKYAOSCred:
		if enabled.Has(KYAOSDelegationCredential) {
			return false
		}
	case hdrDelegationChain:
		if enabled.Has(KYAOSDelegationChain) {
			return false
		}
	case hdrMCPICred, hdrMCPIDelegation:
		return false
	}
	switch n := strings.ToLower(headerSeparators.Replace(k)); n {
	case "x-agent-did", "x-user-did", "x-agent-reputation-score", "x-verified-delegation",
		"mcp-i-credential", "mcp-i-delegation":
		return true
	default:
		return strings.HasPrefix(n, "kya-")
	}
}

var identityHeaderCases = []string{
	"X-Agent-Did", "x.agent.did", "X_AGENT_DID", "X-Agent-Didx", "X-Agent-Di", "X-User-Did",
	"X-Agent-Reputation-Score", "X.Verified_Delegation", "Kya-", "Kya_", "KYA.x", "Kya", "Kyax",
	"Mcp-I-Credential", "Mcp_I_Credential", "mcp-i-delegation", "Mcp-I-Delegationx", "Mcp-Session-Id",
	"K\u212aya-x", "\u212aya-x", "Kya-Delegation", "Kya-Os-Delegation-Credential", "Kya-Os-Delegation-Chain",
	"X-Forwarded-For", "Mcp-Protocol-Version", "X-Agent-D\u0130d", "x-agent-did\u00a0",
}

func TestIsIdentityHeaderAgrees(t *testing.T) {
	for _, enabled := range []Set{0, All, Of(Authorization)} {
		for _, k := range identityHeaderCases {
			if got, want := isIdentityHeader(k, enabled), isIdentityHeaderRef(k, enabled); got != want {
				t.Errorf("isIdentityHeader(%q, %b) = %v, want %v", k, enabled, got, want)
			}
		}
	}
}

func FuzzIsIdentityHeader(f *testing.F) {
	for _, k := range identityHeaderCases {
		f.Add(k, uint8(All))
	}
	f.Fuzz(func(t *testing.T, k string, enabled uint8) {
		if got, want := isIdentityHeader(k, Set(enabled)), isIdentityHeaderRef(k, Set(enabled)); got != want {
			t.Errorf("isIdentityHeader(%q, %b) = %v, want %v", k, enabled, got, want)
		}
	})
}

func TestStripConnectionTokens(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string // nil: no Connection header left
	}{
		{[]string{"keep-alive"}, []string{"keep-alive"}},
		{[]string{"keep-alive, X-Agent-DID"}, []string{"keep-alive"}},
		{[]string{"x_verified_delegation", "Upgrade, kya-os-agent-did ,X-User-Did"}, []string{"Upgrade"}},
		{[]string{"X-Verified-Delegation"}, nil},
		{[]string{"X-Agent-Reputation-Score, , close"}, []string{"close"}},
	} {
		h := http.Header{"Connection": tc.in}
		stripIdentityHeaders(h, All)
		if got := h["Connection"]; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Connection %q → %q, want %q", tc.in, got, tc.want)
		}
	}
}
