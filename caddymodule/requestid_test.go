package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestRequestIDHook: the audit entry's request id is the access log's
// uuid when something before the edge made it, and the hook never makes
// one (which would cost the request seven allocations and add a uuid to
// the access log that nothing asked for). It also pins where Caddy keeps
// the uuid: if Caddy moves it, the first case fails.
func TestRequestIDHook(t *testing.T) {
	prepare := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		return caddyhttp.PrepareRequest(r, caddy.NewReplacer(), httptest.NewRecorder(), nil)
	}

	t.Run("made before the edge", func(t *testing.T) {
		r := prepare()
		repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		uuid, _ := repl.GetString("http.request.uuid")
		if !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(uuid) {
			t.Fatalf("{http.request.uuid} = %q", uuid)
		}
		if got := caddyHooks.RequestID(r); got != uuid {
			t.Errorf("RequestID = %q, want the access log's uuid %q", got, uuid)
		}
	})
	t.Run("not made", func(t *testing.T) {
		r := prepare()
		if got := caddyHooks.RequestID(r); got != "" {
			t.Errorf("RequestID = %q, want none", got)
		}
		if v := caddyhttp.GetVar(r.Context(), caddyUUIDVar); v != nil {
			t.Errorf("the hook made a uuid: %v", v)
		}
		if n := testing.AllocsPerRun(100, func() { caddyHooks.RequestID(r) }); n != 0 {
			t.Errorf("RequestID allocates %v times", n)
		}
	})
}
