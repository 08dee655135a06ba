package caddymodule

import (
	"testing"
	"time"
)

// TestSignInCaddyfile: the sign_in block of authorization_server, its
// {env.*} placeholders read when the config loads, and its errors.
func TestSignInCaddyfile(t *testing.T) {
	t.Setenv("MCPI_TEST_OIDC_ISSUER", "https://idp.example")
	t.Setenv("MCPI_TEST_OIDC_SECRET", "s3cret")
	h, _ := parseForTest(t, `mcpi {
	authorization_server {
		sign_in oidc {
			issuer {env.MCPI_TEST_OIDC_ISSUER}
			client_id edge
			client_secret {env.MCPI_TEST_OIDC_SECRET}
			session_lifetime 30m
		}
	}
	trust authorization_server
}`, "", true)
	if si := h.AuthorizationServer.SignIn; si == nil || si.Issuer != "{env.MCPI_TEST_OIDC_ISSUER}" || si.ClientSecret != "{env.MCPI_TEST_OIDC_SECRET}" {
		t.Fatalf("the adapted config must keep the placeholders (no secret in it): %+v", si)
	}
	cfg := h.edgeConfig()
	if err := resolveSignIn(&cfg); err != nil {
		t.Fatal(err)
	}
	si := cfg.AuthorizationServer.SignIn
	if si.Issuer != "https://idp.example" || si.ClientID != "edge" || si.ClientSecret != "s3cret" || si.SessionLifetime != 30*time.Minute {
		t.Fatalf("resolved %+v", si)
	}
	if h.AuthorizationServer.SignIn.ClientSecret != "{env.MCPI_TEST_OIDC_SECRET}" {
		t.Fatal("resolving changed the handler's own config")
	}

	for name, c := range map[string]struct{ input, wantErr string }{
		"no protocol":      {"mcpi {\n authorization_server {\n sign_in {\n issuer https://idp.example\n client_id c\n }\n }\n trust any\n}", "sign_in needs its protocol"},
		"other protocol":   {"mcpi {\n authorization_server {\n sign_in saml {\n }\n }\n trust any\n}", "sign_in needs its protocol"},
		"unknown option":   {"mcpi {\n authorization_server {\n sign_in oidc {\n issuer https://idp.example\n client_id c\n scope x\n }\n }\n trust any\n}", "unrecognized sign_in option"},
		"no client id":     {"mcpi {\n authorization_server {\n sign_in oidc {\n issuer https://idp.example\n }\n }\n trust any\n}", "needs issuer and client_id"},
		"http issuer":      {"mcpi {\n authorization_server {\n sign_in oidc {\n issuer http://idp.example\n client_id c\n }\n }\n trust any\n}", "must be an https URL"},
		"bad lifetime":     {"mcpi {\n authorization_server {\n sign_in oidc {\n issuer https://idp.example\n client_id c\n session_lifetime later\n }\n }\n trust any\n}", "positive duration"},
		"long lifetime":    {"mcpi {\n authorization_server {\n sign_in oidc {\n issuer https://idp.example\n client_id c\n session_lifetime 24h\n }\n }\n trust any\n}", "at most 12h"},
		"unset secret env": {"mcpi {\n authorization_server {\n sign_in oidc {\n issuer https://idp.example\n client_id c\n client_secret {env.MCPI_TEST_UNSET_SECRET}\n }\n }\n trust any\n}", "client_secret"},
	} {
		t.Run(name, func(t *testing.T) { parseForTest(t, c.input, c.wantErr, true) })
	}
}
