package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestFrontDoorForwardAuth: with forward_auth to an identity provider in
// front of the authorize path, the consent page acts for the user the
// provider's answer names ({http.reverse_proxy.header.Remote-User}), and
// a Remote-User header the client sends itself is no sign-in.
func TestFrontDoorForwardAuth(t *testing.T) {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") != "session=alice" {
			http.Error(w, "sign in", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Remote-User", "alice@idp.example")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(idp.Close)
	rec := &recorder{next: http.HandlerFunc(rpcEcho)}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	caddyfile := testCaddyfile(freePort(t), filepath.Join(dir, "storage"), fmt.Sprintf(`:%d {
	bind 127.0.0.1
	route {
		forward_auth /oauth/authorize %s {
			uri /verify
			copy_headers Remote-User
		}
		mcpi {
			authorization_server {
				user_id_placeholder {http.reverse_proxy.header.Remote-User}
			}
			trust authorization_server
			tool echo {
				scopes echo:execute
			}
		}
		reverse_proxy %s
	}
}
`, h.port, idp.Listener.Addr().String(), up.Listener.Addr().String()))
	h.start(dir, caddyfile)
	ctx := testContext(t)

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/oauth/register", strings.NewReader(`{"redirect_uris":["http://127.0.0.1:1/cb"],"client_name":"fa"}`))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	id := strings.Split(strings.Split(string(body), `"client_id":"`)[1], `"`)[0]
	authURL := h.base + "/oauth/authorize?response_type=code&client_id=" + id + "&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcb&code_challenge=" +
		strings.Repeat("A", 43) + "&code_challenge_method=S256"
	get := func(hdr map[string]string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if s, _ := get(map[string]string{"Remote-User": "mallory"}); s != http.StatusUnauthorized {
		t.Fatalf("not signed in, with a Remote-User header: %d", s)
	}
	s, page := get(map[string]string{"Cookie": "session=alice"})
	if s != 200 || !strings.Contains(page, "alice@idp.example") {
		t.Fatalf("signed in at the provider: %d %s", s, page)
	}
	if s, page := get(map[string]string{"Cookie": "session=alice", "Remote-User": "mallory"}); s != 200 || strings.Contains(page, "mallory") {
		t.Fatalf("signed in, with a forged Remote-User: %d", s)
	}
}
