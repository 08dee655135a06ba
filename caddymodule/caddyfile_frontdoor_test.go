package caddymodule

import (
	"reflect"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
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
	// Alone, the authorization server's users are trust enough.
	parseForTest(t, "mcpi {\n authorization_server\n trust authorization_server\n}", "", true)

	for name, c := range map[string]struct{ input, wantErr string }{
		"trust without the server":   {"mcpi {\n trust authorization_server\n}", "needs the authorization_server block"},
		"trust mixed on one line":    {"mcpi {\n authorization_server\n trust authorization_server " + testDID + "\n}", "stands alone"},
		"trust DIDs then the server": {"mcpi {\n authorization_server\n trust " + testDID + " authorization_server\n}", "own line"},
		"twice":                      {"mcpi {\n authorization_server\n authorization_server\n trust any\n}", "already specified"},
		"unknown option":             {"mcpi {\n authorization_server {\n lifetime 1h\n }\n trust any\n}", "unrecognized authorization_server option"},
		"bad duration":               {"mcpi {\n authorization_server {\n credential_lifetime soon\n }\n trust any\n}", "positive duration"},
		"too long":                   {"mcpi {\n authorization_server {\n credential_lifetime 48h\n }\n trust any\n}", "at most 24h"},
		"argument":                   {"mcpi {\n authorization_server on\n trust any\n}", "wrong argument count"},
		"user from a header":         {"mcpi {\n authorization_server {\n user_id_placeholder {http.request.header.X-User}\n }\n trust any\n}", "the client controls"},
		"user from a cookie":         {"mcpi {\n authorization_server {\n user_id_placeholder {http.request.cookie.user}\n }\n trust any\n}", "the client controls"},
		"not a placeholder":          {"mcpi {\n authorization_server {\n user_id_placeholder alice\n }\n trust any\n}", "one placeholder"},
	} {
		t.Run(name, func(t *testing.T) { parseForTest(t, c.input, c.wantErr, true) })
	}
}
