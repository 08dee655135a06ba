package caddymodule

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/mcpi-edge/caddy-mcpi/edge"
)

func TestCaddyfileRules(t *testing.T) {
	for _, tt := range []struct {
		name, input, wantErr string
		route, tool          []edge.RuleConfig
	}{
		{name: "tool and route", input: "mcpi {\n trust any\n tool transfer {\n  rule cap `arguments.amount <= 100` \"Up to 100.\"\n  rule eu `arguments.region == 'eu'`\n }\n rule weekdays `now.getDayOfWeek() in [1, 2, 3, 4, 5]`\n}",
			route: []edge.RuleConfig{{Name: "weekdays", Expression: "now.getDayOfWeek() in [1, 2, 3, 4, 5]"}},
			tool:  []edge.RuleConfig{{Name: "cap", Expression: "arguments.amount <= 100", Message: "Up to 100."}, {Name: "eu", Expression: "arguments.region == 'eu'"}}},
		{name: "route rules repeat", input: "mcpi {\n trust any\n tool t\n rule a `true`\n rule b `false`\n}",
			route: []edge.RuleConfig{{Name: "a", Expression: "true"}, {Name: "b", Expression: "false"}}},
		{name: "no expression", input: "mcpi {\n rule cap\n}", wantErr: "rule takes a name, a CEL expression"},
		{name: "too many", input: "mcpi {\n rule cap `true` msg extra\n}", wantErr: "rule takes a name, a CEL expression"},
		{name: "syntax error", input: "mcpi {\n trust any\n rule cap `arguments.amount <=`\n}", wantErr: `rule "cap": line 1, column 20 of the expression: Syntax error`},
		{name: "unknown variable in a tool", input: "mcpi {\n trust any\n tool t {\n  rule r `agnet.did == 'x'`\n }\n}", wantErr: "undeclared reference to 'agnet' (in container ''), at Testfile:4"},
		{name: "not a bool", input: "mcpi {\n trust any\n rule r `arguments.size()`\n}", wantErr: "must give a bool"},
		{name: "same name twice", input: "mcpi {\n trust any\n rule r `true`\n tool t {\n  rule r `true`\n }\n}", wantErr: "used once per route"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := parseForTest(t, tt.input, tt.wantErr, true)
			if !ok {
				return
			}
			if !reflect.DeepEqual(h.Rules, tt.route) || len(h.Tools) != 1 || !reflect.DeepEqual(h.Tools[0].Rules, tt.tool) {
				t.Errorf("got %+v and %+v", h.Rules, h.Tools)
			}
		})
	}
}

// TestRuleRefusedAtAdapt: caddy adapt names the Caddyfile line of a rule
// that does not compile, and the column within its expression.
func TestRuleRefusedAtAdapt(t *testing.T) {
	src := ":8080\n\nroute {\n\tmcpi {\n\t\ttrust any\n\t\ttool transfer {\n\t\t\trule cap `arguments.amount <= 100 &&` \"Up to 100.\"\n\t\t}\n\t}\n\treverse_proxy localhost:9000\n}\n"
	_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), map[string]any{"filename": "Caddyfile"})
	if err == nil || !strings.Contains(err.Error(), "at Caddyfile:7") || !strings.Contains(err.Error(), "column 27 of the expression") {
		t.Fatalf("adapt = %v, want an error at Caddyfile:7, column 27 of the expression", err)
	}
}

// TestRulesDocExamples adapts every Caddyfile example of docs/config/rules.md.
func TestRulesDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/config/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```caddyfile\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	n := 0
	for _, b := range blocks {
		if strings.Contains(b[1], "<name>") || strings.Contains(b[1], "<url>") {
			continue // the syntax line
		}
		n++
		body := strings.TrimSuffix(strings.ReplaceAll("\t\t"+b[1], "\n", "\n\t\t"), "\t\t")
		src := ":8080\n\nroute {\n\tmcpi {\n\t\ttrust any\n" + body + "\t}\n\treverse_proxy localhost:9000\n}\n"
		out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
		if err != nil || len(warnings) > 0 {
			t.Errorf("example %d: %v %v\n%s", n, err, warnings, b[1])
			continue
		}
		if !strings.Contains(string(out), `"rules":[`) && !strings.Contains(string(out), `"authzen":{`) {
			t.Errorf("example %d adapts without rules: %s", n, out)
		}
	}
	if n < 2 {
		t.Fatalf("found %d examples", n)
	}
}
