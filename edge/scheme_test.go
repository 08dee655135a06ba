package edge

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
)

// The URLs the edge publishes name the scheme the client used: behind a
// trusted proxy that terminated TLS, X-Forwarded-Proto says https; from an
// untrusted peer the header is ignored.
func TestRequestScheme(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tls     bool
		trusted bool
		proto   string
		want    string
	}{
		{name: "tls", tls: true, want: "https"},
		{name: "plain", want: "http"},
		{name: "trusted proxy says https", trusted: true, proto: "https", want: "https"},
		{name: "trusted proxy, list", trusted: true, proto: "HTTPS, http", want: "https"},
		{name: "trusted proxy says http", trusted: true, proto: "http", want: "http"},
		{name: "untrusted peer says https", proto: "https", want: "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://"+testHost+"/mcp", nil)
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if tc.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tc.proto)
			}
			r = withTrustedProxy(r, tc.trusted)
			h := &Handler{hooks: testHooks}
			if got := h.requestScheme(r); got != tc.want {
				t.Errorf("requestScheme = %s, want %s", got, tc.want)
			}
			if got, want := h.resourceMetadataURL(r), tc.want+"://"+testHost+"/.well-known/oauth-protected-resource/mcp"; got != want {
				t.Errorf("resourceMetadataURL = %s, want %s", got, want)
			}
		})
	}
}
