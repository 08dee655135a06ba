package edge

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// onListener makes r look as if it came in on a listener at port.
func onListener(r *http.Request, port int) *http.Request {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
}

func TestServiceHost(t *testing.T) {
	for _, tt := range []struct {
		host     string
		listener int // 0: not known
		want     string
	}{
		{"a.test", 8081, "a.test"},
		{"A.Test", 8081, "a.test"},
		{"a.test:8081", 8081, "a.test:8081"},
		{"a.test:9443", 8081, "a.test:8081"},   // the client's port does not count
		{"a.test:08081", 8081, "a.test:08081"}, // the same port, spelt otherwise
		{"a.test:x", 8081, "a.test:8081"},      // not a port
		{"a.test:", 8081, "a.test:8081"},       // an empty one
		{"[::1]:9443", 8081, "[::1]:8081"},     // IPv6 literal with a port
		{"[::1]", 8081, "[::1]"},               // and without
		{"a.test:9443", 0, "a.test:9443"},      // listener not known: as sent
		{"XN--BCHER-KVA.test:1", 1, "xn--bcher-kva.test:1"},
	} {
		r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		r.Host = tt.host
		if tt.listener != 0 {
			r = onListener(r, tt.listener)
		}
		if got := serviceHost(r); got != tt.want {
			t.Errorf("serviceHost(Host %q, listener %d) = %q, want %q", tt.host, tt.listener, got, tt.want)
		}
	}
}

// TestDerivedAudienceIgnoresClientPort (review finding): without
// configured audiences, a credential for another port of the same host is
// refused: the port is the listener's, not the one the client wrote.
func TestDerivedAudienceIgnoresClientPort(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil)
	call := func(aud, host string) result {
		tok := f.jwt(t, func(tm *vc.Template) { tm.Audience = []string{aud} })
		r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
		r.Host = host
		r.Header.Set("Authorization", "Bearer "+tok)
		return serve(t, h, onListener(r, 8081))
	}
	wantRejected(t, call("https://a.test:9443", "a.test:9443"), http.StatusUnauthorized, "wrong_audience")
	wantRejected(t, call("did:web:a.test%3A9443", "a.test:9443"), http.StatusUnauthorized, "wrong_audience")
	wantAdmitted(t, call("https://a.test:8081", "a.test:9443"))
	wantAdmitted(t, call("https://a.test:8081", "a.test:8081"))
	wantAdmitted(t, call("did:web:a.test", "a.test"))
}
