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

// TestClusterPromotableFlags: a cluster replica counts unless the cluster
// agreed it failed: the master's own suspicion (fail?) is not the
// cluster's, and the other masters may still elect the replica.
func TestClusterPromotableFlags(t *testing.T) {
	for flags, want := range map[string]bool{
		"slave":                  true,
		"slave,fail?":            true, // the master's suspicion only
		"myself,slave":           true,
		"slave,fail":             false,
		"fail,slave":             false,
		"slave,noaddr":           false,
		"slave,fail?,noaddr":     false,
		"handshake":              false,
		"":                       true,
		"slave,failing":          true, // not a flag Redis writes
		"slave,nofailover":       true,
		"slave,fail?,nofailover": true,
	} {
		if got := clusterPromotable(flags); got != want {
			t.Errorf("clusterPromotable(%q) = %v, want %v", flags, got, want)
		}
	}
}
