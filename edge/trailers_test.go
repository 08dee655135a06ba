package edge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Identity headers and credentials sent as request trailers never reach
// what comes after the handler, with or without a body carrier read. The
// request goes through a real net/http server, which is what merges
// trailers into the request at the end of the body.
func TestIdentityTrailersStripped(t *testing.T) {
	f := newFixture(t)
	tok := f.jwt(t, nil)
	for _, tc := range []struct {
		name     string
		carriers []string
	}{
		{name: "header carrier only (body not read by the edge)", carriers: []string{"authorization"}},
		{name: "body carriers on (body read and restored)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := f.handler(t, func(c *setup) { c.Carriers = tc.carriers })
			var got http.Header
			var called bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				repl := newTestReplacer()
				// Host testHost, forwarded as by a trusted proxy: the
				// test server's port is not the service's.
				r = withTrustedProxy(prepareRequest(r, repl), true)
				next := Next(func(w http.ResponseWriter, r *http.Request) error {
					called = true
					_, _ = io.Copy(io.Discard, r.Body)
					got = r.Trailer.Clone()
					return nil
				})
				_ = h.ServeNext(w, r, next)
			}))
			defer srv.Close()

			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", io.NopCloser(strings.NewReader(toolsCallBody)))
			req.Host = testHost
			req.ContentLength = -1 // chunked, so trailers can follow
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Trailer = http.Header{
				"X-Agent-Did":      {"did:key:forged"},
				"Kya-Os-Agent-Did": {"did:key:forged"},
				"Kya-Delegation":   {tok},
				"Mcp-I-Credential": {tok},
				"X-Harmless":       {"kept"},
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if !called {
				t.Fatalf("request not admitted: %d", resp.StatusCode)
			}
			for k := range got {
				if k != "X-Harmless" {
					t.Errorf("trailer %s reached next: %q", k, got[k])
				}
			}
			if got.Get("X-Harmless") != "kept" {
				t.Errorf("harmless trailer lost: %v", got)
			}
		})
	}
}
