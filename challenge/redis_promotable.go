package challenge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// sentinelReplicas counts the replicas the sentinels could promote, for
// wait_replicas auto under Sentinel. A master's own count of connected
// replicas is not enough: a replica whose link to the master dropped (a
// partition, a failed re-authentication) is not counted by the master, yet
// Sentinel still promotes it if the master dies soon after, and every
// write the master took without it is lost. The sentinels still list such
// a replica, and it counts until they mark it down.
type sentinelReplicas struct {
	master    string
	sentinels []*redis.SentinelClient
}

func newSentinelReplicas(master string, addrs []string, username, password string, ro *redis.Options) *sentinelReplicas {
	sr := &sentinelReplicas{master: master}
	for _, a := range addrs {
		sr.sentinels = append(sr.sentinels, redis.NewSentinelClient(&redis.Options{
			Addr: a, Username: username, Password: password, TLSConfig: ro.TLSConfig,
			DialTimeout: ro.DialTimeout, ReadTimeout: ro.ReadTimeout, WriteTimeout: ro.WriteTimeout,
			PoolSize: 1, MaxRetries: -1, DisableIdentity: true,
		}))
	}
	return sr
}

// count asks every sentinel at once and returns the most replicas any of
// them lists as promotable: not marked down (subjectively or objectively)
// nor unreachable by that sentinel. Sentinels do not share one view: one
// restarted with a fresh configuration learns replicas only from the
// master, which no longer lists a replica it lost, while the others still
// know that replica and would elect it. Trusting the first that answers
// would then wait for nobody. Each ask is bounded by the clients' dial and
// read timeouts and by ctx; a sentinel that does not answer is left out,
// and only when none answers is the count unknown (an error).
func (sr *sentinelReplicas) count(ctx context.Context) (int, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		most = -1
		errs []error
	)
	for _, sc := range sr.sentinels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			list, err := sc.Replicas(ctx, sr.master).Result()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			n := 0
			for _, r := range list {
				if promotable(r["flags"]) {
					n++
				}
			}
			most = max(most, n)
		}()
	}
	wg.Wait()
	if most < 0 {
		return 0, fmt.Errorf("%w: no sentinel listed the replicas of %q: %w", ErrStoreUnavailable, sr.master, errors.Join(errs...))
	}
	return most, nil
}

// promotable reports whether a replica with these Sentinel flags may be
// promoted.
func promotable(flags string) bool {
	for _, f := range strings.Split(flags, ",") {
		switch f {
		case "s_down", "o_down", "disconnected":
			return false
		}
	}
	return true
}

func (sr *sentinelReplicas) close() {
	for _, sc := range sr.sentinels {
		_ = sc.Close()
	}
}
