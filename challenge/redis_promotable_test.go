package challenge

import "testing"

// TestPromotableFlags: a replica counts as one a failover could promote
// unless a sentinel marked it down or cannot reach it.
func TestPromotableFlags(t *testing.T) {
	for flags, want := range map[string]bool{
		"slave":                         true,
		"slave,master_link_down":        true, // a partition from the master: still promotable
		"s_down,slave":                  false,
		"o_down,slave":                  false,
		"s_down,slave,disconnected":     false,
		"slave,disconnected":            false,
		"":                              true,
		"slave,promoted,s_down_weird":   true,
		"slave,,s_down":                 false,
		"disconnected,slave,s_down":     false,
		"slave, s_down":                 true, // not a flag Sentinel writes
		"master_link_down,slave,o_down": false,
	} {
		if got := promotable(flags); got != want {
			t.Errorf("promotable(%q) = %v, want %v", flags, got, want)
		}
	}
}
