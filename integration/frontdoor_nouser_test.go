package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// TestFrontDoorNoSignedInUser: when no authentication signed anyone in —
// no authentication handler at all, or a forward_auth whose identity
// provider answers 2xx without the user header — the consent page answers
// 401 to its GET and to a posted approval, and never redirects with a
// code: nobody acts as a shared user named after the placeholder's text.
func TestFrontDoorNoSignedInUser(t *testing.T) {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK) // no Remote-User
	}))
	t.Cleanup(idp.Close)
	rec := &recorder{next: http.HandlerFunc(rpcEcho)}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	caddyfile := testCaddyfile(freePort(t), filepath.Join(dir, "storage"), fmt.Sprintf(`:%[1]d {
	bind 127.0.0.1
	route {
		mcpi {
			authorization_server
			trust authorization_server
			tool echo {
				scopes echo:execute
			}
		}
		reverse_proxy %[3]s
	}
}

http://fa.test:%[1]d {
	bind 127.0.0.1
	route {
		forward_auth /oauth/authorize %[2]s {
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
		reverse_proxy %[3]s
	}
}
`, h.port, idp.Listener.Addr().String(), up.Listener.Addr().String()))
	h.start(dir, caddyfile)
	ctx := testContext(t)

	do := func(host, method, path string, body url.Values, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			rd = strings.NewReader(body.Encode())
		}
		req, _ := http.NewRequestWithContext(ctx, method, h.base+path, rd)
		req.Host = host
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	for name, host := range map[string]string{
		"no authentication":                    fmt.Sprintf("127.0.0.1:%d", h.port),
		"forward_auth without the user header": fmt.Sprintf("fa.test:%d", h.port),
	} {
		t.Run(name, func(t *testing.T) {
			req := `{"redirect_uris":["http://127.0.0.1:1/cb"],"client_name":"anon"}`
			r, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/oauth/register", strings.NewReader(req))
			r.Host = host
			r.Header.Set("Content-Type", "application/json")
			reg, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(reg.Body)
			reg.Body.Close()
			if reg.StatusCode != http.StatusCreated {
				t.Fatalf("register: %d %s", reg.StatusCode, b)
			}
			id := strings.Split(strings.Split(string(b), `"client_id":"`)[1], `"`)[0]
			q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {"http://127.0.0.1:1/cb"},
				"code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}}
			for _, hdr := range []map[string]string{nil, {"Remote-User": "mallory"}} {
				res, body := do(host, http.MethodGet, "/oauth/authorize?"+q.Encode(), nil, hdr)
				if res.StatusCode != http.StatusUnauthorized || strings.Contains(body, "csrf") {
					t.Fatalf("consent page without a signed-in user (%v): %d %s", hdr, res.StatusCode, body)
				}
				form := url.Values{}
				for k, vs := range q {
					form[k] = vs
				}
				form.Set("csrf", "1.x")
				form.Set("approve", "1")
				form.Set("scope", "echo:execute")
				res, body = do(host, http.MethodPost, "/oauth/authorize", form, hdr)
				if res.StatusCode != http.StatusUnauthorized || strings.Contains(res.Header.Get("Location"), "code=") {
					t.Fatalf("approval without a signed-in user (%v): %d %s %s", hdr, res.StatusCode, res.Header.Get("Location"), body)
				}
			}
		})
	}
}
