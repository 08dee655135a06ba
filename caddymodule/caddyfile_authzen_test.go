package caddymodule

import (
	"reflect"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/authzen"
)

func TestCaddyfileAuthZEN(t *testing.T) {
	for _, tt := range []struct {
		name, input, wantErr string
		want                 *authzen.Config
	}{
		{name: "all settings", input: "mcpi {\n trust any\n authzen http://127.0.0.1:8181 {\n  timeout 250ms\n  cache_ttl 30s\n  cache_size 500\n  allow_private\n  message \"Ask your admin.\"\n }\n}",
			want: &authzen.Config{URL: "http://127.0.0.1:8181", Timeout: edge.Duration(250 * time.Millisecond), CacheTTL: edge.Duration(30 * time.Second),
				CacheSize: 500, AllowPrivate: true, Message: "Ask your admin."}},
		{name: "url only", input: "mcpi {\n trust any\n authzen https://pdp.example.com/access/v1/evaluation\n}",
			want: &authzen.Config{URL: "https://pdp.example.com/access/v1/evaluation"}},
		{name: "no url", input: "mcpi {\n authzen\n}", wantErr: "authzen takes the URL"},
		{name: "twice", input: "mcpi {\n authzen https://a.example\n authzen https://b.example\n}", wantErr: "authzen already specified"},
		{name: "plain http without allow_private", input: "mcpi {\n authzen http://pdp.example.com\n}", wantErr: "allow_private"},
		{name: "bad cache size", input: "mcpi {\n authzen https://a.example {\n  cache_size -3\n }\n}", wantErr: "cache_size must be a positive number"},
		{name: "timeout too long", input: "mcpi {\n authzen https://a.example {\n  timeout 5m\n }\n}", wantErr: "timeout must be between"},
		{name: "unknown setting", input: "mcpi {\n authzen https://a.example {\n  ttl 5s\n }\n}", wantErr: `unrecognized setting "ttl"`},
		{name: "setting twice", input: "mcpi {\n authzen https://a.example {\n  allow_private\n  allow_private\n }\n}", wantErr: "allow_private already specified"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := parseForTest(t, tt.input, tt.wantErr, true)
			if !ok {
				return
			}
			if !reflect.DeepEqual(h.AuthZEN, tt.want) {
				t.Errorf("got %+v, want %+v", h.AuthZEN, tt.want)
			}
		})
	}
}
