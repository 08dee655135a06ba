package caddymodule

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

// nextHandler is a caddyhttp.Handler that is not a HandlerFunc.
type nextHandler struct{ called *int }

func (n nextHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) error {
	*n.called++
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// anonymousToolHandler is a provisioned handler whose tool "public" needs
// no credential.
func anonymousToolHandler(tb testing.TB) *Handler {
	h := &Handler{Config: edge.Config{TrustedIssuers: []string{edge.AnyIssuer}}}
	h.Tools = []ToolPolicy{{Name: "public", AllowAnonymous: true}}
	if err := h.Provision(bareContext(tb)); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Cleanup() })
	return h
}

// TestServeHTTPHandsOn: a request the edge admits (an anonymous tool) reaches
// Caddy's next handler, whether Caddy gives it as a HandlerFunc (as its
// routes do) or as any other Handler; one it refuses does not.
func TestServeHTTPHandsOn(t *testing.T) {
	h := anonymousToolHandler(t)

	call := func(tool string, next caddyhttp.Handler) *httptest.ResponseRecorder {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `"}}`
		r := httptest.NewRequest(http.MethodPost, "http://mcp.example.com/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
		w := httptest.NewRecorder()
		if err := h.ServeHTTP(w, r, next); err != nil {
			t.Fatalf("ServeHTTP: %v", err)
		}
		return w
	}
	for _, tc := range []struct {
		name string
		next func(called *int) caddyhttp.Handler
	}{
		{"HandlerFunc", func(called *int) caddyhttp.Handler {
			return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error { return nextHandler{called}.ServeHTTP(w, r) })
		}},
		{"Handler", func(called *int) caddyhttp.Handler { return nextHandler{called} }},
	} {
		called := 0
		if w := call("public", tc.next(&called)); w.Code != http.StatusNoContent || called != 1 {
			t.Errorf("%s: anonymous tool: HTTP %d, next called %d times", tc.name, w.Code, called)
		}
		called = 0
		if w := call("private", tc.next(&called)); w.Code != http.StatusUnauthorized || called != 0 {
			t.Errorf("%s: no credential: HTTP %d, next called %d times", tc.name, w.Code, called)
		}
	}
}

// BenchmarkServeHTTP is the adapter's share of a request the edge hands on
// (an anonymous tool, so no credential is involved), with Caddy's next
// handler as its routes give it, a HandlerFunc.
func BenchmarkServeHTTP(b *testing.B) {
	h := anonymousToolHandler(b)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"public"}}`)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	ctx := context.WithValue(context.Background(), caddy.ReplacerCtxKey, caddy.NewReplacer())
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://mcp.example.com/mcp", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		if err := h.ServeHTTP(w, r, next); err != nil || w.Code != http.StatusNoContent {
			b.Fatalf("HTTP %d: %v", w.Code, err)
		}
	}
}
