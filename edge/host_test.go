package edge

import (
	"context"
	"crypto/tls"
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
		tls      bool
		trusted  bool // through a trusted proxy
		want     string
	}{
		{host: "a.test:8081", listener: 8081, want: "a.test:8081"},
		{host: "A.Test:8081", listener: 8081, want: "a.test:8081"},
		{host: "a.test:9443", listener: 8081, want: "a.test:8081"},  // the client's port does not count
		{host: "a.test", listener: 8081, want: "a.test:8081"},       // nor its leaving it off
		{host: "a.test:08081", listener: 8081, want: "a.test:8081"}, // one spelling of a port
		{host: "a.test:+8081", listener: 8081, want: "a.test:8081"},
		{host: "a.test:x", listener: 8081, want: "a.test:8081"},
		{host: "a.test:", listener: 8081, want: "a.test:8081"},
		{host: "[::1]:9443", listener: 8081, want: "[::1]:8081"},
		{host: "[::1]", listener: 8081, want: "[::1]:8081"},
		{host: "a.test", listener: 80, want: "a.test"},             // the scheme's default port
		{host: "a.test", listener: 443, tls: true, want: "a.test"}, // likewise
		{host: "a.test", listener: 443, want: "a.test:443"},        // plain http on 443
		{host: "a.test", listener: 8080, trusted: true, want: "a.test"},
		{host: "a.test:443", listener: 8080, trusted: true, want: "a.test:443"},
		{host: "a.test:9443", want: "a.test:9443"}, // listener not known: as sent
		{host: "XN--BCHER-KVA.test:1", listener: 1, want: "xn--bcher-kva.test:1"},
	} {
		r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		r.Host = tt.host
		if tt.listener != 0 {
			r = onListener(r, tt.listener)
		}
		if tt.tls {
			r.TLS = &tls.ConnectionState{}
		}
		r = withTrustedProxy(r, tt.trusted)
		h := &Handler{hooks: testHooks}
		if got := h.serviceHost(r); got != tt.want {
			t.Errorf("serviceHost(Host %q, listener %d, tls %t, trusted %t) = %q, want %q",
				tt.host, tt.listener, tt.tls, tt.trusted, got, tt.want)
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
	// Leaving the port off does not bring the default port's audiences
	// back (review round 3, second pass).
	wantRejected(t, call("https://a.test", "a.test"), http.StatusUnauthorized, "wrong_audience")
	wantRejected(t, call("did:web:a.test", "a.test"), http.StatusUnauthorized, "wrong_audience")
	wantAdmitted(t, call("did:web:a.test%3A8081", "a.test"))
}
