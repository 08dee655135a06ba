package framing

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/edge/refusal"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

const call2026 = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`

func post2026(body, method, name string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://a.test/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(mcp.HeaderProtocolVersion, mcp.Version2026)
	if method != "" {
		r.Header.Set("Mcp-Method", method)
	}
	if name != "" {
		r.Header.Set("Mcp-Name", name)
	}
	return r
}

// Check refuses what it must with the reason and status a client sees,
// and reads a body the carriers did not read exactly once.
func TestCheck(t *testing.T) {
	paramErr := &mcp.FramingError{Header: "Mcp-Param-Text", Reason: "disagrees with the body"}
	for _, tc := range []struct {
		name     string
		r        *http.Request
		decides  bool
		params   error
		reason   string // "": passes
		rpcCode  int
		readBody bool
	}{
		{name: "2025 request without framing", r: httptest.NewRequest(http.MethodPost, "http://a.test/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))},
		{name: "2026 headers agree", r: post2026(call2026, "tools/call", "echo"), readBody: true},
		{name: "2026 Mcp-Name disagrees", r: post2026(call2026, "tools/call", "other"), reason: "header_mismatch", rpcCode: -32020},
		{name: "2026 Mcp-Method missing", r: post2026(call2026, "", "echo"), reason: "header_mismatch", rpcCode: -32020},
		{name: "2026 param header refused", r: post2026(call2026, "tools/call", "echo"), params: paramErr, reason: "header_mismatch", rpcCode: -32020},
		{name: "2026 repeated member names", r: post2026(`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{}}`, "ping", ""), reason: "ambiguous_body", rpcCode: -32600},
		{name: "2026 batch", r: post2026(`[`+call2026+`]`, "tools/call", "echo"), reason: "header_mismatch"},
		{name: "GET is not checked", r: httptest.NewRequest(http.MethodGet, "http://a.test/mcp", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &Framing{MaxBody: 1 << 20, DecidesOnBody: func([]byte) bool { return tc.decides }}
			if tc.params != nil {
				f.ParamHeaders = func(*http.Request, mcp.Message) error { return tc.params }
			}
			var found carrier.Found
			var b Body
			err := f.Check(httptest.NewRecorder(), tc.r, &found, &b)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Check = %v", err)
				}
				if tc.readBody && (found.Body == nil || b.Raw() == nil) {
					t.Error("the body was not kept for the later steps")
				}
				return
			}
			rf, ok := refusal.As(err)
			if !ok || rf.Reason != tc.reason || rf.Status != http.StatusBadRequest {
				t.Fatalf("Check = %v, want a %s refusal", err, tc.reason)
			}
			if tc.rpcCode != 0 && !strings.Contains(string(rf.Body), `"code":`+strconv.Itoa(tc.rpcCode)) {
				t.Errorf("body %s, want code %d", rf.Body, tc.rpcCode)
			}
		})
	}
}

// A body too large for MaxBody is the carrier's error, for the handler's
// table to answer 413.
func TestCheckBodyTooLarge(t *testing.T) {
	f := &Framing{MaxBody: 16}
	err := f.Check(httptest.NewRecorder(), post2026(call2026, "tools/call", "echo"), &carrier.Found{}, &Body{})
	if !errors.Is(err, carrier.ErrBodyTooLarge) {
		t.Fatalf("Check = %v, want ErrBodyTooLarge", err)
	}
}

func TestCheckAmbiguous(t *testing.T) {
	for _, tc := range []struct {
		name, body     string
		decides, proof bool
		refused        bool
	}{
		{"nobody decides", `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`, false, false, false},
		{"folded member names", `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`, true, false, true},
		{"ambiguous proof", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, true, true, true},
		{"plain", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Body
			b.Use([]byte(tc.body))
			f := &Framing{DecidesOnBody: func([]byte) bool { return tc.decides }}
			if tc.proof {
				f.AmbiguousProof = func(proof.Body) bool { return true }
			}
			err := f.CheckAmbiguous(&b)
			if rf, ok := refusal.As(err); ok != tc.refused || (ok && rf.Reason != "ambiguous_body") {
				t.Fatalf("CheckAmbiguous = %v, refused want %t", err, tc.refused)
			}
		})
	}
}

// Framing reads request bodies from clients: whatever they hold, Check
// answers without panicking.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{call2026, `[` + call2026 + `]`, `{"jsonrpc":"2.0","id":1,"method":"ping","method":"x"}`, `{`, ``} {
		f.Add(s, "tools/call", "echo")
	}
	f.Fuzz(func(t *testing.T, body, method, name string) {
		fr := &Framing{MaxBody: 1 << 16, DecidesOnBody: func([]byte) bool { return true }}
		r := post2026(body, "", "")
		r.Header["Mcp-Method"] = []string{method}
		r.Header["Mcp-Name"] = []string{name}
		var b Body
		_ = fr.Check(httptest.NewRecorder(), r, &carrier.Found{}, &b)
		_ = fr.CheckAmbiguous(&b)
	})
}
