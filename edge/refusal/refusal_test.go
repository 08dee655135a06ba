package refusal

import (
	"errors"
	"fmt"
	"net/http"
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
