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
		// "<id> <addr> <flags> <master> ...": flags name fail and noaddr.
		f := strings.Fields(l)
		if len(f) < 3 || strings.Contains(f[2], "fail") || strings.Contains(f[2], "noaddr") {
			continue
		}
		n++
	}
	return n
}
