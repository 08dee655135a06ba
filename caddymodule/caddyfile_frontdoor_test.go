package caddymodule

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestFrontDoorCaddyfile: the authorization_server block and the
// `trust authorization_server` line, beside other trust lines.
func TestFrontDoorCaddyfile(t *testing.T) {
	h, _ := parseForTest(t, `mcpi {
	authorization_server {
		credential_lifetime 30m
		refresh_lifetime 48h
		user_id_placeholder {http.auth.user.id}
	}
	trust authorization_server
	trust `+testDID+`
}`, "", true)
	want := &AuthorizationServerConfig{CredentialLifetime: caddy.Duration(30 * time.Minute), RefreshLifetime: caddy.Duration(48 * time.Hour), UserIDPlaceholder: "{http.auth.user.id}"}
	if !reflect.DeepEqual(h.AuthorizationServer, want) || !h.TrustAuthorizationServer || len(h.TrustedIssuers) != 1 {
		t.Fatalf("%+v %+v", h.AuthorizationServer, h)
	}
	cfg := h.edgeConfig()
	if cfg.AuthorizationServer == nil || cfg.AuthorizationServer.CredentialLifetime != 30*time.Minute || !cfg.TrustAuthorizationServer {
		t.Fatalf("edge config %+v", cfg.FrontDoorConfig)
	}
	// forward_auth: the identity provider's response header.
	parseForTest(t, "mcpi {\n authorization_server {\n user_id_placeholder {http.reverse_proxy.header.Remote-User}\n }\n trust any\n}", "", true)
	// Other placeholders authentication sets: a caddyauth user field, a
	// client certificate Caddy verified.
	parseForTest(t, "mcpi {\n authorization_server {\n user_id_placeholder {http.auth.user.email}\n }\n trust any\n}", "", true)
	parseForTest(t, "mcpi {\n authorization_server {\n user_id_placeholder {http.request.tls.client.subject}\n }\n trust any\n}", "", true)
	// Alone, the authorization server's users are trust enough.
	parseForTest(t, "mcpi {\n authorization_server\n trust authorization_server\n}", "", true)

	for name, c := range map[string]struct{ input, wantErr string }{
		"trust without the server":    {"mcpi {\n trust authorization_server\n}", "needs the authorization_server block"},
		"trust mixed on one line":     {"mcpi {\n authorization_server\n trust authorization_server " + testDID + "\n}", "stands alone"},
		"trust DIDs then the server":  {"mcpi {\n authorization_server\n trust " + testDID + " authorization_server\n}", "own line"},
		"twice":                       {"mcpi {\n authorization_server\n authorization_server\n trust any\n}", "already specified"},
		"unknown option":              {"mcpi {\n authorization_server {\n lifetime 1h\n }\n trust any\n}", "unrecognized authorization_server option"},
		"bad duration":                {"mcpi {\n authorization_server {\n credential_lifetime soon\n }\n trust any\n}", "positive duration"},
		"too long":                    {"mcpi {\n authorization_server {\n credential_lifetime 48h\n }\n trust any\n}", "at most 24h"},
		"argument":                    {"mcpi {\n authorization_server on\n trust any\n}", "wrong argument count"},
		"user from header":            {"mcpi {\n authorization_server {\n user_id_placeholder {http.request.header.X-User}\n }\n trust any\n}", "not set by authentication"},
		"user from cookie":            {"mcpi {\n authorization_server {\n user_id_placeholder {http.request.cookie.user}\n }\n trust any\n}", "not set by authentication"},
		"user from query":             {"mcpi {\n authorization_server {\n user_id_placeholder {http.request.uri.query.user}\n }\n trust any\n}", "not set by authentication"},
		"user from uri":               {"mcpi {\n authorization_server {\n user_id_placeholder {http.request.uri}\n }\n trust any\n}", "not set by authentication"},
		"user from vars":              {"mcpi {\n authorization_server {\n user_id_placeholder {http.vars.user}\n }\n trust any\n}", "not set by authentication"},
		"user from vars shorthand":    {"mcpi {\n authorization_server {\n user_id_placeholder {vars.user}\n }\n trust any\n}", "not set by authentication"},
		"user from map output":        {"mcpi {\n authorization_server {\n user_id_placeholder {user_from_map}\n }\n trust any\n}", "not set by authentication"},
		"user from regexp capture":    {"mcpi {\n authorization_server {\n user_id_placeholder {http.regexp.u.1}\n }\n trust any\n}", "not set by authentication"},
		"user from header shorthand":  {"mcpi {\n authorization_server {\n user_id_placeholder {header.X-User}\n }\n trust any\n}", "not set by authentication"},
		"user from request tls other": {"mcpi {\n authorization_server {\n user_id_placeholder {http.request.tls.server_name}\n }\n trust any\n}", "not set by authentication"},
		"user from auth prefix only":  {"mcpi {\n authorization_server {\n user_id_placeholder {http.auth.user.}\n }\n trust any\n}", "not set by authentication"},
		"user from env":               {"mcpi {\n authorization_server {\n user_id_placeholder {env.USER}\n }\n trust any\n}", "not set by authentication"},
		"not a placeholder":           {"mcpi {\n authorization_server {\n user_id_placeholder alice\n }\n trust any\n}", "one placeholder"},
	} {
		t.Run(name, func(t *testing.T) { parseForTest(t, c.input, c.wantErr, true) })
	}
}

// TestSignedInUser: the user is the placeholder's value when
// authentication set it; unset, empty, or placeholder text is nobody, and
// a client certificate names a user only when Caddy verified it.
func TestSignedInUser(t *testing.T) {
	verified := &tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: "alice"}}},
	}
	verified.VerifiedChains = [][]*x509.Certificate{verified.PeerCertificates}
	unverified := &tls.ConnectionState{PeerCertificates: verified.PeerCertificates}
	for name, c := range map[string]struct {
		placeholder string
		set         map[string]any
		tls         *tls.ConnectionState
		want        string
	}{
		"default, set":          {"", map[string]any{"http.auth.user.id": "alice"}, nil, "alice"},
		"kept as it is":         {"", map[string]any{"http.auth.user.id": " alice "}, nil, " alice "},
		"default, not set":      {"", nil, nil, ""},
		"empty":                 {"", map[string]any{"http.auth.user.id": ""}, nil, ""},
		"blank":                 {"", map[string]any{"http.auth.user.id": "  "}, nil, ""},
		"placeholder text":      {"", map[string]any{"http.auth.user.id": "{http.auth.user.id}"}, nil, ""},
		"other placeholder":     {"", map[string]any{"http.auth.user.id": "x{http.vars.u}"}, nil, ""},
		"forward_auth, set":     {"{http.reverse_proxy.header.Remote-User}", map[string]any{"http.reverse_proxy.header.Remote-User": "bob"}, nil, "bob"},
		"forward_auth, absent":  {"{http.reverse_proxy.header.Remote-User}", nil, nil, ""},
		"forward_auth, empty":   {"{http.reverse_proxy.header.Remote-User}", map[string]any{"http.reverse_proxy.header.Remote-User": ""}, nil, ""},
		"no client certificate": {"{http.request.tls.client.fingerprint}", nil, &tls.ConnectionState{}, ""},
		"no TLS":                {"{http.request.tls.client.subject}", nil, nil, ""},
		"unverified":            {"{http.request.tls.client.subject}", nil, unverified, ""},
		"verified":              {"{http.request.tls.client.subject}", nil, verified, "CN=alice"},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "https://mcp.example/oauth/authorize", nil)
			r.TLS = c.tls
			repl := caddyhttp.NewTestReplacer(r)
			for k, v := range c.set {
				repl.Set(k, v)
			}
			r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl))
			if got := signedInUser(c.placeholder)(r); got != c.want {
				t.Fatalf("user %q, want %q", got, c.want)
			}
		})
	}
}
