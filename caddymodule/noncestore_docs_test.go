package caddymodule

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// TestRedisDeploymentCaddyfiles adapts each Caddyfile of docs/deployment.md
// marked "redis-deployment: <kind>", and checks that the nonce store
// comes out as that kind of deployment.
func TestRedisDeploymentCaddyfiles(t *testing.T) {
	doc, err := os.ReadFile("../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)<!-- redis-deployment: ([a-z-]+) -->\n```caddyfile\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	want := map[string][]string{
		"standalone": {`"backend":"redis"`, `"url":"redis://redis.internal:6379/0"`},
		"sentinel":   {`"sentinel_master":"mymaster"`, `"addresses":["10.0.2.1:26379","10.0.2.2:26379","10.0.2.3:26379"]`, `"wait_replicas":"1"`},
		"cluster":    {`"cluster":true`, `"addresses":["10.0.3.1:6379","10.0.3.2:6379","10.0.3.3:6379"]`, `"pool_size":20`},
		"tls-acl":    {`"tls":true`, `"username":"mcpi-edge"`, `"tls_ca":"/etc/caddy/redis-ca.pem"`, `"db":1`},
	}
	seen := map[string]bool{}
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, b := range blocks {
		kind, text := b[1], b[2]
		seen[kind] = true
		t.Run(kind, func(t *testing.T) {
			out, warnings, err := adapter.Adapt([]byte(text), nil)
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			if len(warnings) > 0 {
				t.Errorf("warnings: %v", warnings)
			}
			for _, w := range want[kind] {
				if !strings.Contains(string(out), w) {
					t.Errorf("adapted JSON lacks %s:\n%s", w, out)
				}
			}
		})
	}
	for kind := range want {
		if !seen[kind] {
			t.Errorf("docs/deployment.md has no Caddyfile marked redis-deployment: %s", kind)
		}
	}
}
