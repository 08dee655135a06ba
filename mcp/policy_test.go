package mcp

import (
	"slices"
	"strings"
	"testing"
)

func TestPolicyDecide(t *testing.T) {
	rules := []ToolRule{
		{Pattern: "files_*", Scopes: []string{"files:read"}},
		{Pattern: "files_write*", Scopes: []string{"files:read", "files:write"}},
		{Pattern: "files_writeback", Scopes: []string{"files:admin"}},
		{Pattern: "public_*", AllowAnonymous: true},
		{Pattern: "sign", Scopes: []string{"wallet:sign"}, RequirePresentation: true},
		{Pattern: "whoami"},
		{Pattern: "ns/*", Scopes: []string{"ns"}},
	}
	tests := []struct {
		name      string
		policy    Policy
		tool      string
		granted   []string
		anonymous bool
		presented bool
		allowed   bool
		reason    string
		pattern   string // of the deciding rule; "" for none
		missing   []string
	}{
		{"no rules allows", Policy{}, "anything", nil, false, false, true, ReasonNoPolicy, "", nil},
		{"no rules, anonymous", Policy{}, "anything", nil, true, false, true, ReasonNoPolicy, "", nil},
		{"no rules, explicit deny", Policy{Default: DefaultDeny}, "anything", nil, false, false, false, ReasonNoMatchingRule, "", nil},
		{"unmatched, default deny once rules exist", Policy{Rules: rules}, "delete_all", []string{"files:read"}, false, false, false, ReasonNoMatchingRule, "", nil},
		{"unmatched, default allow", Policy{Rules: rules, Default: DefaultAllow}, "delete_all", nil, false, false, true, ReasonDefaultAllow, "", nil},
		{"glob granted", Policy{Rules: rules}, "files_list", []string{"files:read"}, false, false, true, ReasonGranted, "files_*", nil},
		{"glob missing", Policy{Rules: rules}, "files_list", []string{"other"}, false, false, false, ReasonInsufficientScope, "files_*", []string{"files:read"}},
		{"longest glob wins", Policy{Rules: rules}, "files_write_all", []string{"files:read"}, false, false, false, ReasonInsufficientScope, "files_write*", []string{"files:write"}},
		{"longest glob lists every missing scope", Policy{Rules: rules}, "files_write_all", nil, false, false, false, ReasonInsufficientScope, "files_write*", []string{"files:read", "files:write"}},
		{"exact beats globs", Policy{Rules: rules}, "files_writeback", []string{"files:read", "files:write"}, false, false, false, ReasonInsufficientScope, "files_writeback", []string{"files:admin"}},
		{"exact granted", Policy{Rules: rules}, "files_writeback", []string{"files:admin"}, false, false, true, ReasonGranted, "files_writeback", nil},
		{"anonymous denied", Policy{Rules: rules}, "files_list", nil, true, false, false, ReasonAnonymous, "files_*", []string{"files:read"}},
		{"anonymous ignores claimed scopes", Policy{Rules: rules}, "files_list", []string{"files:read"}, true, false, false, ReasonAnonymous, "files_*", []string{"files:read"}},
		{"public tool, anonymous", Policy{Rules: rules}, "public_time", nil, true, false, true, ReasonPublic, "public_*", nil},
		{"public tool, authenticated", Policy{Rules: rules}, "public_time", nil, false, false, true, ReasonPublic, "public_*", nil},
		{"presentation required", Policy{Rules: rules}, "sign", []string{"wallet:sign"}, false, false, false, ReasonPresentationRequired, "sign", nil},
		{"presentation given", Policy{Rules: rules}, "sign", []string{"wallet:sign"}, false, true, true, ReasonGranted, "sign", nil},
		{"presentation given, scope missing", Policy{Rules: rules}, "sign", nil, false, true, false, ReasonInsufficientScope, "sign", []string{"wallet:sign"}},
		{"no scopes: any verified caller", Policy{Rules: rules}, "whoami", nil, false, false, true, ReasonGranted, "whoami", nil},
		{"no scopes: not anonymous", Policy{Rules: rules}, "whoami", nil, true, false, false, ReasonAnonymous, "whoami", nil},
		{"glob star does not cross slash", Policy{Rules: rules}, "ns/a/b", []string{"ns"}, false, false, false, ReasonNoMatchingRule, "", nil},
		{"glob with slash", Policy{Rules: rules}, "ns/a", []string{"ns"}, false, false, true, ReasonGranted, "ns/*", nil},
		{"exact match is case-sensitive", Policy{Rules: rules}, "WHOAMI", nil, false, false, false, ReasonNoMatchingRule, "", nil},
		{"implied KYA scope", Policy{Rules: []ToolRule{{Pattern: "*"}}, ImpliedScope: DefaultScopeForTool}, "checkout", []string{"search:execute"}, false, false, false, ReasonInsufficientScope, "*", []string{"checkout:execute"}},
		{"implied KYA scope granted", Policy{Rules: []ToolRule{{Pattern: "*"}}, ImpliedScope: DefaultScopeForTool}, "checkout", []string{"checkout:execute"}, false, false, true, ReasonGranted, "*", nil},
		{"explicit scopes override implied", Policy{Rules: []ToolRule{{Pattern: "*", Scopes: []string{"x"}}}, ImpliedScope: DefaultScopeForTool}, "checkout", []string{"x"}, false, false, true, ReasonGranted, "*", nil},
		{"equal-length globs: first wins", Policy{Rules: []ToolRule{{Pattern: "a*", Scopes: []string{"first"}}, {Pattern: "*b", Scopes: []string{"second"}}}}, "ab", nil, false, false, false, ReasonInsufficientScope, "a*", []string{"first"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.policy.Decide(tt.tool, tt.granted, tt.anonymous, tt.presented)
			if d.Allowed != tt.allowed || d.Reason != tt.reason {
				t.Errorf("Decide = {Allowed: %v, Reason: %q}, want {%v, %q}", d.Allowed, d.Reason, tt.allowed, tt.reason)
			}
			switch {
			case tt.pattern == "" && d.Rule != nil:
				t.Errorf("Rule = %q, want none", d.Rule.Pattern)
			case tt.pattern != "" && (d.Rule == nil || d.Rule.Pattern != tt.pattern):
				t.Errorf("Rule = %v, want %q", d.Rule, tt.pattern)
			}
			if !slices.Equal(d.Missing, tt.missing) {
				t.Errorf("Missing = %q, want %q", d.Missing, tt.missing)
			}
		})
	}
}

func TestPolicyRulePointsIntoPolicy(t *testing.T) {
	p := Policy{Rules: []ToolRule{{Pattern: "a"}}}
	if d := p.Decide("a", nil, false, false); d.Rule != &p.Rules[0] {
		t.Error("Decision.Rule does not point into Policy.Rules")
	}
}

func TestPolicyValidate(t *testing.T) {
	ok := Policy{Rules: []ToolRule{{Pattern: "a"}, {Pattern: "b*", Scopes: []string{"s"}}}, Default: DefaultAllow}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid policy: %v", err)
	}
	tests := []struct {
		name string
		p    Policy
		want string
	}{
		{"empty pattern", Policy{Rules: []ToolRule{{Pattern: ""}}}, "empty pattern"},
		{"bad glob", Policy{Rules: []ToolRule{{Pattern: "a["}}}, "syntax error"},
		{"duplicate", Policy{Rules: []ToolRule{{Pattern: "a"}, {Pattern: "a"}}}, "listed twice"},
		{"empty scope", Policy{Rules: []ToolRule{{Pattern: "a", Scopes: []string{""}}}}, "empty scope"},
		{"anonymous with presentation", Policy{Rules: []ToolRule{{Pattern: "a", AllowAnonymous: true, RequirePresentation: true}}}, "contradicts"},
		{"bad default", Policy{Default: 9}, "unknown default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestParseDefaultAction(t *testing.T) {
	for s, want := range map[string]DefaultAction{"": DefaultUnset, "deny": DefaultDeny, "allow": DefaultAllow} {
		got, err := ParseDefaultAction(s)
		if err != nil || got != want || got.String() != s {
			t.Errorf("ParseDefaultAction(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseDefaultAction("Allow"); err == nil {
		t.Error("ParseDefaultAction accepted Allow")
	}
}

func TestDefaultScopeForTool(t *testing.T) {
	if got := DefaultScopeForTool("checkout"); got != "checkout:execute" {
		t.Errorf("got %q", got)
	}
}

func TestLabelForTool(t *testing.T) {
	p := Policy{Rules: []ToolRule{{Pattern: "checkout"}, {Pattern: "files_*"}}}
	tests := []struct {
		name  string
		known func(string) bool
		want  string
	}{
		{"checkout", p.KnownTool, "checkout"},
		{"files_list", p.KnownTool, "other"}, // globs are not a bounded set
		{"files_*", p.KnownTool, "other"},
		{"random", p.KnownTool, "other"},
		{"", p.KnownTool, "other"},
		{"checkout", nil, "other"},
		{strings.Repeat("a", 65), func(string) bool { return true }, "other"},
	}
	for _, tt := range tests {
		if got := LabelForTool(tt.name, tt.known); got != tt.want {
			t.Errorf("LabelForTool(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
