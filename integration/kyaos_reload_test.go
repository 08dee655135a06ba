package integration

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proofReloadSite is the edge of TestKYAOSReplayAfterStoreReload: proofs
// required, nonces in a memory store of maxEntries.
func proofReloadSite(globals string, port int, upstream string, maxEntries int) string {
	return globals + fmt.Sprintf(`
:%d {
	bind 127.0.0.1
	mcpi {
		trust any
		request_proof required
		nonce_store memory %d
	}
	reverse_proxy %s
}
`, port, maxEntries, upstream)
}

// TestKYAOSReplayAfterStoreReload: a reload that changes the memory nonce
// store's max_entries keeps the nonces already used: a proof
// admitted before the reload is refused after it (401 nonce_replayed),
// and only its first use reached the upstream.
func TestKYAOSReplayAfterStoreReload(t *testing.T) {
	port, adminPort := freePort(t), freePort(t)
	dir := t.TempDir()
	globals := opsGlobals(adminPort, dir, time.Second, "\tauto_https off\n")
	w := opsWorld(t, hostAudience(port))
	cred := w.jwt(t)
	rec := &recorder{next: jsonRPCUpstream()}
	up := httptest.NewServer(rec)
	t.Cleanup(up.Close)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	e := startOpsEdge(t, dir, adminPort, proofReloadSite(globals, port, up.Listener.Addr().String(), 20),
		answersHTTP(client, base+"/.well-known/oauth-protected-resource"))

	send := func(body string) (int, string) {
		var resp *http.Response
		// Right after a reload, a new connection can land on the old
		// server as its grace period closes it (EOF, no answer): Caddy's
		// listener hand-off, seen once in CI. The request is sent again
		// on a new connection; whether or not the first reached the edge,
		// a replay must be refused, and the upstream count below still
		// holds every use that got through.
		for attempt := 1; ; attempt++ {
			req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("KYA-OS-Delegation-Credential", cred)
			var err error
			if resp, err = client.Do(req); err == nil {
				break
			}
			if attempt == 3 || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	proof := proveAs(t, w.agent, hostAudience(port), time.Now(), kyaosCall)
	if status, body := send(proof); status != http.StatusOK {
		t.Fatalf("first use: %d %s", status, body)
	}
	for _, maxEntries := range []int{20, 21, 100000, 20} {
		if err := e.load(proofReloadSite(globals, port, up.Listener.Addr().String(), maxEntries)); err != nil {
			t.Fatal(err)
		}
		if status, body := send(proof); status != http.StatusUnauthorized || !strings.Contains(body, `"nonce_replayed"`) {
			t.Fatalf("after a reload to max_entries %d: %d %s", maxEntries, status, body)
		}
	}
	if n := len(rec.Requests()); n != 1 {
		t.Fatalf("%d requests reached the upstream, want the first use only", n)
	}
}
