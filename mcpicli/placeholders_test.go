package mcpicli

import (
	"slices"
	"testing"
)

// TestUnsetPlaceholders: which placeholders count as unset.
func TestUnsetPlaceholders(t *testing.T) {
	t.Setenv("MCPI_TEST_SET", "x")
	t.Setenv("MCPI_TEST_EMPTY", "")
	for _, tc := range []struct {
		text    string
		adapted bool
		want    []string
	}{
		{"{env.MCPI_TEST_A} {env.MCPI_TEST_SET} {env.MCPI_TEST_EMPTY} {env.MCPI_TEST_A}", false, []string{"{env.MCPI_TEST_A}"}},
		{"{$MCPI_TEST_A} {$MCPI_TEST_B:default} {$MCPI_TEST_SET}", true, []string{"{$MCPI_TEST_A}"}},
		{"{$MCPI_TEST_A}", false, nil}, // JSON: no adaptation expands it
		{"{env.} {env.1A} {$} {http.request.host} {env.MCPI-TEST}", true, nil},
		{"", true, nil},
	} {
		if got := unsetPlaceholders(tc.text, tc.adapted); !slices.Equal(got, tc.want) {
			t.Errorf("unsetPlaceholders(%q, %t) = %q, want %q", tc.text, tc.adapted, got, tc.want)
		}
	}
}
