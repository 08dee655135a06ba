package refusal

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAsAndError(t *testing.T) {
	cause := errors.New("Mcp-Method disagrees with the body")
	rf := JSONRPC(http.StatusBadRequest, "header_mismatch", []byte(`7`), -32020, cause.Error(), cause)
	wrapped := fmt.Errorf("framing: %w", rf)
	got, ok := As(wrapped)
	if !ok || got != rf {
		t.Fatalf("As = %v, %t", got, ok)
	}
	if !errors.Is(wrapped, cause) {
		t.Error("a refusal does not unwrap to its cause")
	}
	if s := rf.Error(); !strings.Contains(s, "400 header_mismatch") {
		t.Errorf("Error() = %q", s)
	}
	if string(rf.Body) != `{"jsonrpc":"2.0","id":7,"error":{"code":-32020,"message":"Mcp-Method disagrees with the body"}}` {
		t.Errorf("body %s", rf.Body)
	}
	if _, ok := As(cause); ok {
		t.Error("a plain error is a refusal")
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("a\"b\\c\r\nd"); got != `a\"b\\cd` {
		t.Errorf("Quote = %q", got)
	}
}

// Write answers each kind of refusal as a client sees it.
func TestWrite(t *testing.T) {
	const rm = "https://a.test/.well-known/oauth-protected-resource/mcp"
	t.Run("credential asked for", func(t *testing.T) {
		w := httptest.NewRecorder()
		Write(w, &Refusal{Status: 401, Reason: "no_credential", OAuth: &OAuth{Code: "invalid_token", Description: "no credential", Challenge: true}}, rm)
		if got := w.Header().Get("WWW-Authenticate"); got != `Bearer resource_metadata="`+rm+`"` {
			t.Errorf("WWW-Authenticate %q", got)
		}
		if w.Code != 401 || w.Body.String() != `{"error":"invalid_token","error_description":"no credential"}` || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%d %s", w.Code, w.Body)
		}
	})
	t.Run("DPoP proof refused", func(t *testing.T) {
		w := httptest.NewRecorder()
		Write(w, &Refusal{Status: 401, Reason: "dpop_invalid", OAuth: &OAuth{Code: "invalid_token", Description: "d", VCReason: "dpop_invalid", Challenge: true, DPoPError: "invalid_dpop_proof"}}, rm)
		ch := w.Header().Values("WWW-Authenticate")
		if len(ch) != 2 || !strings.HasPrefix(ch[0], `Bearer error="invalid_token", error_description="dpop_invalid", `) ||
			!strings.HasPrefix(ch[1], `DPoP error="invalid_dpop_proof", error_description="dpop_invalid", algs="`) {
			t.Errorf("WWW-Authenticate %q", ch)
		}
	})
	t.Run("JSON-RPC error with a header", func(t *testing.T) {
		w := httptest.NewRecorder()
		rf := JSONRPC(400, "body_unreadable", nil, -32600, "gzip", nil)
		rf.Header = http.Header{"Accept-Encoding": {"identity"}}
		Write(w, rf, "")
		if w.Code != 400 || w.Header().Get("Accept-Encoding") != "identity" || w.Header().Get("WWW-Authenticate") != "" ||
			w.Body.String() != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"gzip"}}` {
			t.Errorf("%d %v %s", w.Code, w.Header(), w.Body)
		}
	})
	t.Run("nothing to answer", func(t *testing.T) {
		w := httptest.NewRecorder()
		Write(w, &Refusal{Status: http.StatusAccepted, Reason: "denied"}, "")
		if w.Code != http.StatusAccepted || w.Body.Len() != 0 || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%d %q", w.Code, w.Body)
		}
	})
}
