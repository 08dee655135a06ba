package caddymodule

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
)

func TestCaddyfileRateLimit(t *testing.T) {
	for _, tt := range []struct {
		name, input, wantErr string
		want                 edge.RateLimitConfig
	}{
		{name: "one", input: "mcpi {\n trust any\n rate_limit agent 100/1m\n}",
			want: edge.RateLimitConfig{RateLimits: []ratelimit.Limit{{Key: []string{"agent"}, Rate: 100, Per: time.Minute}}}},
		{name: "several, burst, days, fail open", input: "mcpi {\n trust any\n rate_limit agent+tool 10/s burst 5\n rate_limit user 10000/1d\n rate_limit tool 50/1m\n rate_limit_fail_open\n}",
			want: edge.RateLimitConfig{RateLimitFailOpen: true, RateLimits: []ratelimit.Limit{
				{Key: []string{"agent", "tool"}, Rate: 10, Per: time.Second, Burst: 5},
				{Key: []string{"user"}, Rate: 10000, Per: 24 * time.Hour},
				{Key: []string{"tool"}, Rate: 50, Per: time.Minute},
			}}},
		{name: "no args", input: "mcpi {\n rate_limit\n}", wantErr: "takes a key and a rate"},
		{name: "no rate", input: "mcpi {\n rate_limit agent\n}", wantErr: "takes a key and a rate"},
		{name: "three args", input: "mcpi {\n rate_limit agent 1/s burst\n}", wantErr: "takes a key and a rate"},
		{name: "bad key", input: "mcpi {\n rate_limit did 1/s\n}", wantErr: `unknown key "did"`},
		{name: "key twice", input: "mcpi {\n rate_limit agent+agent 1/s\n}", wantErr: "given twice"},
		{name: "bad rate", input: "mcpi {\n rate_limit agent 100\n}", wantErr: "<calls>/<period>"},
		{name: "zero calls", input: "mcpi {\n rate_limit agent 0/1m\n}", wantErr: "positive integer"},
		{name: "bad period", input: "mcpi {\n rate_limit agent 1/soon\n}", wantErr: "positive duration"},
		{name: "not burst", input: "mcpi {\n rate_limit agent 1/s bust 3\n}", wantErr: "burst <n>"},
		{name: "zero burst", input: "mcpi {\n rate_limit agent 1/s burst 0\n}", wantErr: "burst <n>"},
		{name: "block", input: "mcpi {\n rate_limit agent 1/s {\n x\n }\n}", wantErr: "takes no block"},
		{name: "same limit twice", input: "mcpi {\n rate_limit agent+tool 1/s\n rate_limit tool+agent 1/s\n}", wantErr: "given twice"},
		{name: "fail open twice", input: "mcpi {\n rate_limit_fail_open\n rate_limit_fail_open\n}", wantErr: "already specified"},
		{name: "fail open arg", input: "mcpi {\n rate_limit_fail_open yes\n}", wantErr: "wrong argument count"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := parseForTest(t, tt.input, tt.wantErr, true)
			if !ok {
				return
			}
			if !reflect.DeepEqual(h.RateLimitConfig, tt.want) {
				t.Errorf("got  %+v\nwant %+v", h.RateLimitConfig, tt.want)
			}
		})
	}
}

// The limits reach the edge's configuration with their periods.
func TestRateLimitEdgeConfig(t *testing.T) {
	h := Handler{Config: edge.Config{RateLimitConfig: edge.RateLimitConfig{RateLimits: []ratelimit.Limit{{Key: []string{"agent", "tool"}, Rate: 10, Per: time.Minute, Burst: 3}}}}}
	got := h.edgeConfig().RateLimits
	want := []ratelimit.Limit{{Key: []string{"agent", "tool"}, Rate: 10, Per: time.Minute, Burst: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("edge.Config.RateLimits = %+v, want %+v", got, want)
	}
}

// TestRateLimitCaddyfilesInDocs adapts each Caddyfile of
// docs/config/ratelimit.md marked "rate-limit-example", as `caddy adapt`
// does, and checks the limits in its JSON.
func TestRateLimitCaddyfilesInDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/config/ratelimit.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)<!-- rate-limit-example: ([a-z-]+) -->\n```caddyfile\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	want := map[string][]string{
		"per-agent-and-tool": {`"rate_limits":[{"burst":60,"key":["agent"],"per":3600000000000,"rate":600},{"key":["agent","tool"],"per":60000000000,"rate":10},{"key":["user"],"per":86400000000000,"rate":10000}]`},
		"shared-redis":       {`"rate_limits":[{"key":["agent"],"per":60000000000,"rate":100}]`, `"backend":"redis"`, `"rate_limit_fail_open":true`},
	}
	seen := map[string]bool{}
	for _, b := range blocks {
		name, text := b[1], b[2]
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(text), nil)
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			if len(warnings) > 0 {
				t.Errorf("warnings: %v", warnings)
			}
			for _, w := range want[name] {
				if !strings.Contains(string(out), w) {
					t.Errorf("adapted JSON lacks %s:\n%s", w, out)
				}
			}
		})
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("docs/config/ratelimit.md has no Caddyfile marked rate-limit-example: %s", name)
		}
	}
}
