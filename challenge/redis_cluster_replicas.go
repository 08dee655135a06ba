package challenge

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// clusterReplicas counts the replicas the cluster configuration of the
// master c lists and does not hold failed: the ones a failover could
// promote, whether or not the master has them connected now. A replica
// whose link to the master is cut is no longer counted by the master
// (connected_slaves), but the cluster still promotes it when the master
// dies, without the writes the master took meanwhile: writes must keep
// waiting for it (and fail closed while it is away). An error counts as
// unknown (-1).
//
// The list is the master's view, so only what the cluster agreed on
// removes a replica from it (clusterPromotable): the master's own
// suspicion does not, for the other masters may still reach the replica
// and elect it.
func clusterReplicas(ctx context.Context, c redis.UniversalClient) int {
	id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil || id == "" {
		return -1
	}
	lines, err := c.Do(ctx, "CLUSTER", "REPLICAS", id).StringSlice()
	if err != nil {
		return -1
	}
	n := 0
	for _, l := range lines {
		// "<id> <addr> <flags> <master> ...".
		if f := strings.Fields(l); len(f) >= 3 && clusterPromotable(f[2]) {
			n++
		}
	}
	return n
}

// clusterPromotable reports whether a replica with these CLUSTER REPLICAS
// flags may be promoted. "fail" is the cluster's agreement that the node
// is down; "fail?" is only the asking node's suspicion (a partition
// between it and the replica), and the other masters may still vote for
// the replica. "noaddr" is a node nobody can reach.
func clusterPromotable(flags string) bool {
	for _, f := range strings.Split(flags, ",") {
		switch f {
		case "fail", "noaddr", "handshake":
			return false
		}
	}
	return true
}
