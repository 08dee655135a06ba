package challenge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A store that is not told to accept eviction (RedisOptions.AcceptEviction)
// refuses single-use writes (Put, UseOnce) while the server's
// maxmemory-policy is not known to be noeviction: a challenge, proof
// nonce or presentation record evicted before its TTL could be used
// again. Checking once at start is not enough: the policy can be changed
// at run time (CONFIG SET), a server down at start is unchecked, and a
// restart or failover can bring one with another policy. So the policy is
// read again every EvictionCheckInterval, on every new connection (a
// restarted or promoted server is reached through new ones), and, while
// unknown, before a write.

// DefaultEvictionCheckInterval is how often the policy is read again.
const DefaultEvictionCheckInterval = 30 * time.Second

// ErrEvictionRisk is wrapped (beside ErrStoreUnavailable, so the request
// fails closed with 503) by the error of a single-use write refused
// because the server may evict keys, or would not say whether it does.
var ErrEvictionRisk = errors.New("challenge: the Redis server may evict the store's keys")

// evictionGuard is a store's view of its server's eviction policy.
type evictionGuard struct {
	// verdict is nil until the policy has been read (or refused) since the
	// store was made.
	verdict atomic.Pointer[evictionVerdict]
	// reading is closed when the read made on a write's behalf is done:
	// of writes arriving while the policy is unknown, one asks and the
	// others wait for its answer rather than each asking in turn (which,
	// with the server down, would hold each for a dial timeout more).
	mu      sync.Mutex
	reading chan struct{}
	// cluster: a policy read on one connection speaks for its node only,
	// so only a full check (every master) may clear a refusal.
	cluster bool
	stop    context.CancelFunc
	done    chan struct{}
}

// evictionVerdict is what writes get: refusal, or nil under noeviction.
type evictionVerdict struct{ refusal error }

// record sets the guard from a reading of the policy: one that answered
// without the policy refuses writes, as one that may evict does. A server
// that could not be reached leaves a noeviction verdict as it was (the
// write then fails on its own, saying the server is unreachable), and
// turns a refusal into "unknown": the policy it refused may have been
// fixed since, or the server that comes back be another, and the write's
// error must say that the server does not answer, not repeat the policy it
// had when it last did. Unknown, the policy is read before the next write.
func (g *evictionGuard) record(policy string, err error, full bool) {
	var refusal error
	switch {
	case errors.Is(err, ErrStoreUnavailable):
		if v := g.verdict.Load(); v != nil && v.refusal != nil {
			g.verdict.CompareAndSwap(v, nil)
		}
		return
	case err != nil:
		refusal = fmt.Errorf("%w: %w: it would not report its maxmemory-policy (%w); grant the store's ACL user INFO "+
			"(ACL SETUSER <user> +info) so that it can tell, or accept the risk of eviction", ErrStoreUnavailable, ErrEvictionRisk, err)
	case policy != NoEviction:
		refusal = fmt.Errorf("%w: %w: its maxmemory-policy is %s (every key the store writes has a TTL, so volatile-* "+
			"policies evict them too); set maxmemory-policy noeviction on it, or accept the risk of eviction",
			ErrStoreUnavailable, ErrEvictionRisk, policy)
	}
	if refusal == nil && g.cluster && !full {
		return // one node's noeviction says nothing of the others
	}
	g.verdict.Store(&evictionVerdict{refusal})
}

// state is whether the policy is known, and the refusal it calls for.
func (g *evictionGuard) state() (bool, error) {
	v := g.verdict.Load()
	if v == nil {
		return false, nil
	}
	return true, v.refusal
}

// allow returns nil when a single-use write may be made: the policy is
// known to be noeviction. While it is unknown, it is read first.
func (s *RedisStore) allow(ctx context.Context) error {
	g := s.evict
	if g == nil {
		return nil
	}
	checked, refusal := g.state()
	if checked {
		return refusal
	}
	g.mu.Lock()
	reading := g.reading
	if reading == nil {
		reading = make(chan struct{})
		g.reading = reading
		g.mu.Unlock()
		_, _ = s.EvictionPolicy(ctx)
		g.mu.Lock()
		g.reading = nil
		close(reading)
	}
	g.mu.Unlock()
	select {
	case <-reading:
	case <-ctx.Done():
	}
	if checked, refusal = g.state(); checked {
		return refusal
	}
	return fmt.Errorf("%w: the Redis server does not answer, so its maxmemory-policy is not known; "+
		"single-use writes wait until it answers and reports noeviction", ErrStoreUnavailable)
}

// written is the outcome of a single-use write that allow let through,
// whose error is err: a success is refused when the policy read on the
// connection it used (onConnect) now refuses writes, since that write was
// made on a server that may evict it.
func (s *RedisStore) written(err error) error {
	if err != nil || s.evict == nil {
		return err
	}
	if _, refusal := s.evict.state(); refusal != nil {
		return refusal
	}
	return nil
}

// onConnect reads the policy on each new connection, before it carries
// a command. Sentinels' connections go through it too: they report
// redis_mode sentinel and are let be. An error reply (no INFO for this
// ACL user) changes nothing here: the periodic check and provisioning
// report it; a connection that fails is refused, as it would be anyway.
func (s *RedisStore) onConnect(ctx context.Context, cn *redis.Conn) error {
	info, err := cn.Info(ctx, "default").Result()
	if err != nil {
		var reply redis.Error
		if errors.As(err, &reply) {
			return nil
		}
		return err
	}
	if mode, _ := infoField(info, "redis_mode"); mode == "sentinel" {
		return nil
	}
	policy, ok := infoField(info, "maxmemory_policy")
	if !ok || policy == "" {
		return nil // left to the full check, which also asks CONFIG GET
	}
	s.evict.record(policy, nil, false)
	return nil
}

// recheck reads the policy every interval until stopped.
func (s *RedisStore) recheck(ctx context.Context, interval, timeout time.Duration) {
	defer close(s.evict.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			cctx, cancel := context.WithTimeout(ctx, timeout)
			_, _ = s.EvictionPolicy(cctx)
			cancel()
		}
	}
}
