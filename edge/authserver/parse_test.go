package authserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

func newTestServer(t testing.TB) *Server {
	t.Helper()
	st := challenge.NewMemoryStore(context.Background())
	t.Cleanup(func() { _ = st.Close() })
	s, err := New(context.Background(), Config{}, Deps{
		Store:  st,
		Origin: func(*http.Request) string { return "https://edge.example" },
		User:   func(*http.Request) string { return "" },
		Scopes: []Scope{{Name: "a"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRedirectURIs: only https, or http on a loopback address, without a
// fragment, user info or opaque form, at most 512 bytes.
func TestRedirectURIs(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://app.example/cb":     true,
		"http://127.0.0.1:3000/cb":   true,
		"http://localhost:9/cb":      true,
		"http://[::1]:9/cb":          true,
		"http://127.1.2.3/cb":        true,
		"http://app.example/cb":      false,
		"http://10.0.0.1/cb":         false,
		"javascript:alert(1)":        false,
		"data:text/html,x":           false,
		"https://app.example/cb#f":   false,
		"https://u:p@app.example/cb": false,
		"https:app.example":          false,
		"https:///cb":                false,
		"custom://cb":                false,
		"":                           false,
		"https://app.example/c b":    false,
		"https://app.example/\\evil": false,
		"https://app.example/" + strings.Repeat("a", 600): false,
	} {
		if err := checkRedirectURI(u); (err == nil) != ok {
			t.Errorf("%q: err %v, want ok=%t", u, err, ok)
		}
	}
}

// TestClientIDs: a client_id is accepted only as made, under this server's
// secret; any change, or another server's id, is unknown.
func TestClientIDs(t *testing.T) {
	s, other := newTestServer(t), newTestServer(t)
	id := s.newClientID(registrationAt([]string{"https://app.example/cb"}, "App", time.Now()))
	if c, err := s.parseClientID(id); err != nil || c.Name != "App" || len(c.RedirectURIs) != 1 {
		t.Fatalf("own id: %+v %v", c, err)
	}
	if _, err := other.parseClientID(id); err == nil {
		t.Error("another server's id accepted")
	}
	for name, bad := range map[string]string{
		"empty":        "",
		"no prefix":    strings.TrimPrefix(id, clientIDPrefix),
		"no mac":       id[:strings.LastIndexByte(id, '.')],
		"mac changed":  id[:len(id)-3] + "AAA",
		"body changed": clientIDPrefix + "e30" + id[strings.LastIndexByte(id, '.'):],
		"huge":         clientIDPrefix + strings.Repeat("A", 9000) + ".x",
		"url":          "https://127.0.0.1/x",
	} {
		if _, err := s.parseClientID(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestRegistrationBodies: malformed and ambiguous registrations are refused.
func TestRegistrationBodies(t *testing.T) {
	s := newTestServer(t)
	for body, want := range map[string]int{
		`{"redirect_uris":["https://a.example/cb"]}`:                                          201,
		`{"redirect_uris":["https://a.example/cb"],"logo_uri":"https://x","software_id":"y"}`: 201,
		`{"redirect_uris":["https://a.example/cb"],"redirect_uris":["https://b.example/cb"]}`: 400,
		`{"Redirect_URIs":["https://a.example/cb"]}`:                                          400,
		`{"redirect_uris":[]}`:                     400,
		`{"redirect_uris":"https://a.example/cb"}`: 400,
		`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`: 400,
		`{"redirect_uris":["https://a.example/cb"],"grant_types":["client_credentials"]}`:               400,
		`{"redirect_uris":["https://a.example/cb"],"client_name":"a\u0000b"}`:                           400,
		`{"redirect_uris":["1","2","3","4","5","6"]}`:                                                   400,
		`[]`:    400,
		`{`:     400,
		`{} {}`: 400,
		`null`:  400,
		"":      400,
		`{"redirect_uris":["https://a.example/cb"],"client_name":"` + strings.Repeat("n", 101) + `"}`: 400,
	} {
		req := httptest.NewRequest(http.MethodPost, "https://edge.example/oauth/register", strings.NewReader(body))
		rec := httptest.NewRecorder()
		s.serveRegister(rec, req)
		if rec.Code != want {
			t.Errorf("%s: %d, want %d (%s)", body, rec.Code, want, rec.Body)
		}
	}
	big := httptest.NewRequest(http.MethodPost, "https://edge.example/oauth/register", strings.NewReader(`{"x":"`+strings.Repeat("a", 20000)+`"}`))
	rec := httptest.NewRecorder()
	s.serveRegister(rec, big)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized registration: %d", rec.Code)
	}
}

// TestRefreshTokenShape: only tokens this server made name a family.
func TestRefreshTokenShape(t *testing.T) {
	s := newTestServer(t)
	head := "0123456789abcdefghijkl." + randomToken()
	good := head + "." + encodeMAC(mac(s.secrets.refresh, head))
	if fam, ok := s.refreshFamily(good); !ok || fam != "0123456789abcdefghijkl" {
		t.Fatalf("own token: %q %t", fam, ok)
	}
	for _, bad := range []string{"", ".", "a.b.c", head, head + ".", good + "x", "x" + good[1:], strings.Repeat("a", 300),
		"short." + randomToken() + "." + encodeMAC(mac(s.secrets.refresh, "short."+randomToken()))} {
		if _, ok := s.refreshFamily(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestUserDIDs: only did:web …:oauth:users:<22 base64url> is a user DID.
func TestUserDIDs(t *testing.T) {
	for did, ok := range map[string]bool{
		"did:web:edge.example:oauth:users:AAAAAAAAAAAAAAAAAAAAAA":        true,
		"did:web:edge.example%3A8443:oauth:users:AAAAAAAAAAAAAAAAAAAAAA": true,
		"did:web:edge.example:oauth:users:AAAA":                          false,
		"did:web:edge.example:oauth:users:AAAAAAAAAAAAAAAAAAAAA*":        false,
		"did:web:edge.example:oauth:users:AAAAAAAAAAAAAAAAAAAAAA:x":      false,
		"did:key:z6Mk:oauth:users:AAAAAAAAAAAAAAAAAAAAAA":                false,
		"did:web::oauth:users:AAAAAAAAAAAAAAAAAAAAAA":                    false,
		"did:web:edge.example":                                           false,
	} {
		if IsUserDID(did) != ok {
			t.Errorf("%s: %t", did, !ok)
		}
	}
}

// TestPKCE: only the S256 of a well-formed verifier matches.
func TestPKCE(t *testing.T) {
	v := strings.Repeat("a", 43)
	c := "pS9j6V8xRQB1pBLyIoJXjsVp0B8S9_wGxxXLTxNYcoA" // not the challenge of v
	if pkceOK(v, c) {
		t.Error("wrong challenge matched")
	}
	for _, bad := range []string{"", strings.Repeat("a", 42), strings.Repeat("a", 129), strings.Repeat("a", 42) + "+"} {
		if pkceOK(bad, c) {
			t.Errorf("verifier %q accepted", bad)
		}
	}
}

func FuzzClientID(f *testing.F) {
	s := newTestServer(f)
	f.Add(s.newClientID(registrationAt([]string{"https://a.example/cb"}, "A", time.Now())))
	f.Add(clientIDPrefix + "e30.AAAA")
	f.Fuzz(func(t *testing.T, id string) {
		c, err := s.parseClientID(id)
		if err == nil {
			for _, u := range c.RedirectURIs {
				_ = checkRedirectURI(u)
			}
		}
	})
}

func FuzzRegistration(f *testing.F) {
	s := newTestServer(f)
	f.Add(`{"redirect_uris":["https://a.example/cb"],"client_name":"x"}`)
	f.Add(`{"redirect_uris":["http://127.0.0.1/cb"],"grant_types":["authorization_code"]}`)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, "https://edge.example/oauth/register", strings.NewReader(body))
		rec := httptest.NewRecorder()
		s.serveRegister(rec, req)
		if rec.Code == http.StatusCreated {
			// Whatever was accepted makes a client whose redirect URIs pass.
			var out struct {
				ClientID string `json:"client_id"`
			}
			if err := readStrict(rec.Body.Bytes(), &out, "client_id"); err != nil {
				t.Fatal(err)
			}
			c, err := s.parseClientID(out.ClientID)
			if err != nil {
				t.Fatalf("registered id refused: %v", err)
			}
			for _, u := range c.RedirectURIs {
				if checkRedirectURI(u) != nil {
					t.Fatalf("registered a bad redirect %q", u)
				}
			}
		}
	})
}

func FuzzRefreshToken(f *testing.F) {
	s := newTestServer(f)
	f.Add("0123456789abcdefghijkl.x.y")
	f.Fuzz(func(t *testing.T, tok string) {
		if _, ok := s.refreshFamily(tok); ok {
			t.Fatalf("forged refresh token accepted: %q", tok)
		}
	})
}

func FuzzCredentialFamily(f *testing.F) {
	s := newTestServer(f)
	f.Add("eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJkaWQ6d2ViOmEifQ.AA")
	f.Fuzz(func(t *testing.T, tok string) {
		req := httptest.NewRequest(http.MethodPost, "https://edge.example/oauth/revoke", nil)
		if _, ok := s.credentialFamily(req, tok); ok {
			t.Fatalf("unsigned token named a family: %q", tok)
		}
	})
}

// TestCORS: browser clients may read metadata and call the token endpoint
// from any origin; the consent page is not opened to scripts.
func TestCORS(t *testing.T) {
	s := newTestServer(t)
	for path, open := range map[string]bool{"/oauth/token": true, "/.well-known/oauth-authorization-server": true, "/oauth/register": true, "/oauth/authorize": false} {
		req := httptest.NewRequest(http.MethodOptions, "https://edge.example"+path, nil)
		req.Header.Set("Origin", "https://inspector.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		rec := httptest.NewRecorder()
		s.Serve(rec, req)
		if got := rec.Header().Get("Access-Control-Allow-Origin") == "*"; got != open {
			t.Errorf("%s: CORS open %t, want %t", path, got, open)
		}
		if open && rec.Code != http.StatusNoContent {
			t.Errorf("%s preflight: %d", path, rec.Code)
		}
	}
}
