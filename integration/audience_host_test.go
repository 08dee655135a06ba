package integration

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestDerivedAudienceHostWithoutPort: a site on a.test:<port> with derived
// audiences (no `audience`). A credential minted for another service on the
// same name, https://a.test (port 443), is admitted by sending "Host: a.test"
// without a port: Caddy's host matcher ignores the port, and serviceHost
// keeps a Host without a port as it is.
func TestDerivedAudienceHostWithoutPort(t *testing.T) {
	rec := &recorder{next: mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	h.start(dir, testCaddyfile(freePort(t), filepath.Join(dir, "storage"), fmt.Sprintf(`http://a.test:%[1]d, http://127.0.0.1:%[1]d {
	bind 127.0.0.1
	mcpi {
		trust any
	}
	reverse_proxy %[2]s
}
`, h.port, up.Listener.Addr().String())))
	w := newWorld(t, h)
	ownAud := "https://a.test:" + strconv.Itoa(h.port)
	for _, aud := range []string{"https://a.test", "did:web:a.test", "https://a.test:9443", ownAud} {
		tok := w.jwt(t, func(tm *vc.Template) { tm.Audience = []string{aud} })
		for _, host := range []string{"a.test:" + strconv.Itoa(h.port), "a.test", "a.test:9443", "A.Test"} {
			req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, h.base+mcpserver.Path, nil)
			req.Host = host
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			rec.Reset()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			n := len(rec.Requests())
			if own := aud == ownAud; own && n == 0 {
				t.Errorf("a credential for %s refused at a.test:%d with Host %q (HTTP %d)", aud, h.port, host, resp.StatusCode)
			} else if !own && n > 0 {
				t.Errorf("BYPASS: a credential for %s admitted at a.test:%d with Host %q (HTTP %d)", aud, h.port, host, resp.StatusCode)
			}
		}
	}
}
