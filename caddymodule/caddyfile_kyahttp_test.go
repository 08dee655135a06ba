package caddymodule

import (
	"testing"
	"time"
)

// TestKYAHTTPCaddyfile: kya_http turns draft-kya-http-02 on inside the
// authorization_server block, with its interval; it needs level 2.
func TestKYAHTTPCaddyfile(t *testing.T) {
	h, _ := parseForTest(t, "mcpi {\n level 2\n authorization_server {\n kya_http 5m\n kya_http_interval 2s\n }\n trust authorization_server\n}", "", true)
	cfg := h.edgeConfig()
	k := cfg.AuthorizationServer.KYAHTTP
	if k == nil || k.TTL != 5*time.Minute || k.Interval != 2*time.Second {
		t.Fatalf("edge config kya_http %+v", k)
	}
	for name, c := range map[string]struct{ input, wantErr string }{
		"below level 2":     {"mcpi {\n authorization_server {\n kya_http 5m\n }\n trust authorization_server\n}", "set level 2 or 3"},
		"too long":          {"mcpi {\n level 2\n authorization_server {\n kya_http 1h\n }\n trust authorization_server\n}", "between 1s and 10m"},
		"not a duration":    {"mcpi {\n level 2\n authorization_server {\n kya_http on\n }\n trust authorization_server\n}", "positive duration"},
		"interval alone":    {"mcpi {\n level 2\n authorization_server {\n kya_http_interval 2s\n }\n trust authorization_server\n}", "needs kya_http"},
		"interval too long": {"mcpi {\n level 2\n authorization_server {\n kya_http 5m\n kya_http_interval 10m\n }\n trust authorization_server\n}", "between 1s and 5m"},
		"no argument":       {"mcpi {\n level 2\n authorization_server {\n kya_http\n }\n trust authorization_server\n}", "wrong argument count"},
	} {
		t.Run(name, func(t *testing.T) { parseForTest(t, c.input, c.wantErr, true) })
	}
}
