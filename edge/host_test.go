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

// TestDerivedAudienceIgnoresClientPort: without configured audiences, a
// credential for another port of the same host is refused: the port is the
// listener's, not the one the client wrote, or a credential for one service
// would be accepted by another on the same host.
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
	// back: the listener's port still decides.
	wantRejected(t, call("https://a.test", "a.test"), http.StatusUnauthorized, "wrong_audience")
	wantRejected(t, call("did:web:a.test", "a.test"), http.StatusUnauthorized, "wrong_audience")
	wantAdmitted(t, call("did:web:a.test%3A8081", "a.test"))
}
