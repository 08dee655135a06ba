package mcp

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// hdr builds headers from name, value pairs; a name may repeat.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func mustParse(t testing.TB, body string) ([]Message, bool) {
	t.Helper()
	msgs, batch, err := ParseMessages([]byte(body))
	if err != nil {
		t.Fatalf("ParseMessages(%s): %v", body, err)
	}
	return msgs, batch
}

const meta26 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`

func TestCheckFraming(t *testing.T) {
	v26 := []string{HeaderProtocolVersion, Version2026}
	with := func(kv ...string) http.Header { return hdr(append(append([]string{}, v26...), kv...)...) }
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` + meta26 + `}}`
	tests := []struct {
		name    string
		h       http.Header
		body    string
		era     Era
		code    int    // 0: accepted
		inError string // the header named by the error
	}{
		// 2025: nothing mirrored, nothing checked.
		{name: "2025 no headers", h: hdr(), body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, era: Era2025},
		{name: "2025 header, stray Mcp-Name ignored", h: hdr(HeaderProtocolVersion, "2025-11-25", HeaderName, "other"),
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, era: Era2025},
		{name: "2025 batch", h: hdr(HeaderProtocolVersion, "2025-03-26"),
			body: `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, era: Era2025},

		// 2026: accepted forms.
		{name: "call", h: with(HeaderMethod, "tools/call", HeaderName, "echo"), body: call, era: Era2026},
		{name: "call base64 name", h: with(HeaderMethod, "tools/call", HeaderName, "=?base64?ZWNobw==?="), body: call, era: Era2026},
		{name: "unicode name base64", h: with(HeaderMethod, "tools/call", HeaderName, EncodeHeaderValue("wetter-müde")),
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wetter-m\u00fcde"}}`, era: Era2026},
		{name: "resource uri", h: with(HeaderMethod, "resources/read", HeaderName, "file:///a b"),
			body: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a b"}}`, era: Era2026},
		{name: "prompt", h: with(HeaderMethod, "prompts/get", HeaderName, "p"),
			body: `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`, era: Era2026},
		{name: "list needs no name", h: with(HeaderMethod, "tools/list"),
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta26 + `}}`, era: Era2026},
		{name: "notification", h: with(HeaderMethod, "notifications/cancelled"),
			body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, era: Era2026},
		{name: "response", h: with(), body: `{"jsonrpc":"2.0","id":1,"result":{}}`, era: Era2026},

		// 2026: refused.
		{name: "method missing", h: with(HeaderName, "echo"), body: call, era: Era2026, code: CodeHeaderMismatch, inError: HeaderMethod},
		{name: "method empty", h: with(HeaderMethod, "", HeaderName, "echo"), body: call, era: Era2026, code: CodeHeaderMismatch, inError: HeaderMethod},
		{name: "method mismatch", h: with(HeaderMethod, "tools/list", HeaderName, "echo"), body: call, era: Era2026, code: CodeHeaderMismatch, inError: HeaderMethod},
		{name: "method case differs", h: with(HeaderMethod, "Tools/Call", HeaderName, "echo"), body: call, era: Era2026, code: CodeHeaderMismatch, inError: HeaderMethod},
		{name: "method twice", h: with(HeaderMethod, "tools/call", HeaderMethod, "tools/call", HeaderName, "echo"), body: call, era: Era2026, code: CodeHeaderMismatch, inError: HeaderMethod},
		{name: "name missing", h: with(HeaderMethod, "tools/call"), body: call, era: Era2026, code: CodeHeaderMismatch, inError: HeaderName},
		{name: "name mismatch", h: with(HeaderMethod, "tools/call", HeaderName, "admin_delete"), body: call, era: Era2026, code: CodeHeaderMismatch, inError: HeaderName},
		{name: "name mismatch reversed", h: with(HeaderMethod, "tools/call", HeaderName, "echo"),
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"admin_delete"}}`, era: Era2026, code: CodeHeaderMismatch, inError: HeaderName},
		{name: "name base64 of another", h: with(HeaderMethod, "tools/call", HeaderName, EncodeHeaderValue(" admin_delete")), body: call, era: Era2026, code: CodeHeaderMismatch, inError: HeaderName},
		{name: "name bad base64", h: with(HeaderMethod, "tools/call", HeaderName, "=?base64?!!!?="), body: call, era: Era2026, code: CodeHeaderMismatch, inError: HeaderName},
		{name: "name base64 not utf8", h: with(HeaderMethod, "tools/call", HeaderName, "=?base64?/w==?="), body: call, era: Era2026, code: CodeHeaderMismatch, inError: HeaderName},
		{name: "name twice", h: with(HeaderMethod, "tools/call", HeaderName, "echo", HeaderName, "echo"), body: call, era: Era2026, code: CodeHeaderMismatch, inError: HeaderName},
		{name: "uri not a string", h: with(HeaderMethod, "resources/read", HeaderName, "1"),
			body: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":1}}`, era: Era2026, code: CodeHeaderMismatch, inError: HeaderName},
		{name: "uri missing", h: with(HeaderMethod, "resources/read", HeaderName, "x"),
			body: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{}}`, era: Era2026, code: CodeHeaderMismatch, inError: HeaderName},
		{name: "prompt name case variant", h: with(HeaderMethod, "prompts/get", HeaderName, "p"),
			body: `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","Name":"q"}}`, era: Era2026, code: CodeInvalidParams},
		{name: "prompt name kelvin fold", h: with(HeaderMethod, "resources/read", HeaderName, "a"),
			body: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a","ur\u0130":"b"}}`, era: Era2026, code: CodeInvalidParams},
		{name: "batch", h: with(HeaderMethod, "ping"),
			body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, era: Era2026, code: CodeInvalidRequest},

		// The version in the header and in _meta.
		{name: "meta without header", h: hdr(HeaderMethod, "tools/call", HeaderName, "echo"), body: call, era: Era2025, code: CodeHeaderMismatch, inError: HeaderProtocolVersion},
		{name: "meta disagrees with header", h: hdr(HeaderProtocolVersion, "2025-11-25"), body: call, era: Era2025, code: CodeHeaderMismatch, inError: HeaderProtocolVersion},
		{name: "header twice", h: hdr(HeaderProtocolVersion, Version2026, HeaderProtocolVersion, Version2026), body: call, era: Era2025, code: CodeHeaderMismatch, inError: HeaderProtocolVersion},
		{name: "header malformed", h: hdr(HeaderProtocolVersion, "zzz"), body: call, era: Era2025, code: CodeHeaderMismatch, inError: HeaderProtocolVersion},
		{name: "meta key case variant", h: with(HeaderMethod, "ping"),
			body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{},"_Meta":{}}}`, era: Era2025, code: CodeInvalidParams},
		{name: "meta version key repeated", h: with(HeaderMethod, "ping"),
			body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`, era: Era2025, code: CodeInvalidParams},
		{name: "meta version escaped still read", h: hdr(HeaderProtocolVersion, "2025-11-25"),
			body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}}`, era: Era2025, code: CodeHeaderMismatch, inError: HeaderProtocolVersion},
		{name: "meta version not a string is absent", h: hdr(), body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":1}}}`, era: Era2025},
		{name: "notification meta not checked", h: hdr(), body: `{"jsonrpc":"2.0","method":"notifications/x","params":{` + meta26 + `}}`, era: Era2025},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, batch := mustParse(t, tt.body)
			era, err := CheckFraming(tt.h, msgs, batch)
			if era != tt.era {
				t.Errorf("era %d, want %d", era, tt.era)
			}
			if tt.code == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if c := ErrorCode(err); c != tt.code {
				t.Errorf("code %d, want %d (%v)", c, tt.code, err)
			}
			if fe, ok := errors.AsType[*FramingError](err); tt.inError != "" && (!ok || fe.Header != tt.inError) {
				t.Errorf("error %v does not name %s", err, tt.inError)
			}
			if strings.Contains(err.Error(), "admin_delete") {
				t.Errorf("error quotes a value: %v", err)
			}
		})
	}
}

func TestHeaderEraAndNeedsFraming(t *testing.T) {
	for _, tt := range []struct {
		h     http.Header
		body  string
		era   Era
		needs bool
	}{
		{hdr(), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, Era2025, false},
		{hdr(HeaderProtocolVersion, "2025-11-25"), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, Era2025, false},
		{hdr(HeaderProtocolVersion, "2025-11-25"), `{"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}}`, Era2025, true},
		{hdr(HeaderProtocolVersion, Version2026), ``, Era2026, true},
		{hdr(HeaderProtocolVersion, "2027-01-01"), ``, Era2026, true},
		{hdr(HeaderProtocolVersion, "9"), ``, Era2025, true}, // malformed: CheckFraming refuses it
		{hdr(HeaderProtocolVersion, "2025-11-25", HeaderProtocolVersion, "2025-11-25"), ``, Era2025, true},
	} {
		if got := HeaderEra(tt.h); got != tt.era {
			t.Errorf("HeaderEra(%v) = %d, want %d", tt.h, got, tt.era)
		}
		if got := NeedsFraming(tt.h, []byte(tt.body)); got != tt.needs {
			t.Errorf("NeedsFraming(%v, %s) = %v, want %v", tt.h, tt.body, got, tt.needs)
		}
	}
}

func TestHeaderValueRoundTrip(t *testing.T) {
	for _, s := range []string{"echo", "", " lead", "trail\t", "ümlaut", "a\r\nb", "=?base64?eA==?=", "file:///x?y=1"} {
		enc := EncodeHeaderValue(s)
		if strings.ContainsAny(enc, "\r\n") {
			t.Errorf("%q encodes with a line break: %q", s, enc)
		}
		if got, ok := DecodeHeaderValue(enc); !ok || got != s {
			t.Errorf("%q -> %q -> %q, %v", s, enc, got, ok)
		}
	}
}

func FuzzCheckFraming(f *testing.F) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` + meta26 + `}}`
	f.Add([]byte(call), Version2026, "tools/call", "echo")
	f.Add([]byte(call), Version2026, "tools/call", "=?base64?ZWNobw==?=")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"u","URI":"v"}}`), Version2026, "resources/read", "u")
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`), "2025-11-25", "ping", "")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":[]}}`), "", "", "")
	f.Fuzz(func(t *testing.T, body []byte, version, method, name string) {
		msgs, batch, err := ParseMessages(body)
		if err != nil {
			return
		}
		h := http.Header{}
		for k, v := range map[string]string{HeaderProtocolVersion: version, HeaderMethod: method, HeaderName: name} {
			if v != "" {
				h.Set(k, v)
			}
		}
		era, err := CheckFraming(h, msgs, batch)
		if err != nil {
			if c := ErrorCode(err); c != CodeHeaderMismatch && c != CodeInvalidParams && c != CodeInvalidRequest {
				t.Fatalf("error %v maps to %d", err, c)
			}
			return
		}
		if era != HeaderEra(h) {
			t.Fatalf("era %d, header says %d", era, HeaderEra(h))
		}
		if era != Era2026 || batch || msgs[0].Method == "" {
			return
		}
		// Accepted in 2026: the headers say what the body says.
		if method != msgs[0].Method {
			t.Fatalf("Mcp-Method %q accepted for %q", method, msgs[0].Method)
		}
		if member, ok := namedMethods[method]; ok {
			var p map[string]json.RawMessage
			if json.Unmarshal(msgs[0].Params, &p) != nil {
				t.Fatalf("accepted params %s", msgs[0].Params)
			}
			var v string
			got, _ := DecodeHeaderValue(name)
			if json.Unmarshal(p[member], &v) != nil || v != got {
				t.Fatalf("Mcp-Name %q accepted for %s", name, p[member])
			}
		}
	})
}
