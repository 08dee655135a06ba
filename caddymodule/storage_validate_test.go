package caddymodule

import "testing"

func TestValidatingArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"caddy", "validate", "--config", "Caddyfile"}, true},
		{[]string{"caddy", "adapt", "--config", "Caddyfile", "--validate"}, true},
		{[]string{"caddy", "adapt", "--validate=true"}, true},
		{[]string{"caddy", "adapt", "--config", "Caddyfile"}, false},
		{[]string{"caddy", "run", "--config", "validate"}, false},
		{[]string{"caddy", "mcpi", "rotate-key"}, false},
		{[]string{"caddy"}, false},
		{nil, false},
	} {
		if got := validatingArgs(tc.args); got != tc.want {
			t.Errorf("validatingArgs(%q) = %t, want %t", tc.args, got, tc.want)
		}
	}
}
