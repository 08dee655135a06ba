package challenge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis replication is asynchronous: a master acknowledges a write before
// any replica has it, and a replica promoted after the master dies may
// never have seen it. A single-use record lost that way (a proof nonce, a
// presentation's replay record, a challenge consumed) can be used once more
// on the new master. WAIT closes the window: the write counts only once
// replicas have acknowledged it, and when they do not in time the request
// fails closed (503) instead of being admitted on a write a failover could
// lose.

// RedisOptions.WaitReplicas values besides a positive number.
const (
	// RedisWaitAuto waits for one replica whenever the master reports a
	// connected replica or, under Sentinel, the sentinels list one they
	// could promote (asked again every replicaRecheck and after a
	// failure), and writes without waiting when there is none: a master
	// alone has nothing a failover could promote.
	RedisWaitAuto = 0
	// RedisWaitOff never waits: the deployment accepts that a failover may
	// let a single-use record be used twice.
	RedisWaitOff = -1
)

// DefaultRedisWaitTimeout bounds one WAIT. A replica on the same network
// acknowledges within a millisecond or two; one that takes longer is
// stalled, and the request is refused rather than held.
const DefaultRedisWaitTimeout = 250 * time.Millisecond

// replicaRecheck is how long a master's replica count is trusted in auto
// mode before it is asked again.
const replicaRecheck = 5 * time.Second

// ErrReplicasNotAcked is wrapped (beside ErrStoreUnavailable) by the error
// of a single-use write that too few replicas acknowledged in time.
var ErrReplicasNotAcked = errors.New("challenge: Redis replicas did not acknowledge the write in time " +
	"(a failover now could lose it, so it is not relied on); check the replicas' link to the master, " +
	"or raise wait_replicas' timeout")

// replicaWait is a store's replica acknowledgement policy.
type replicaWait struct {
	// n is the replicas to wait for; 0 never waits.
	n int
	// strict: n replicas must acknowledge, however many the master has;
	// otherwise (auto) at most as many as it has connected.
	strict  bool
	timeout time.Duration
	// timeoutArg is WAIT's timeout argument in ms, boxed once.
	timeoutArg any

	// sentinels, under Sentinel in auto mode, count the replicas a
	// failover could promote (redis_promotable.go); nil otherwise.
	sentinels *sentinelReplicas

	mu sync.Mutex
	// known holds, in auto mode, the replicas each master (by address; ""
	// for the one master of a standalone or Sentinel deployment) had
	// connected when last asked. Bounded by the masters of the deployment.
	known map[string]replicaCount
}

type replicaCount struct {
	n  int
	at time.Time
}

func newReplicaWait(kind string, want int, timeout time.Duration) (*replicaWait, error) {
	if want < RedisWaitOff {
		return nil, fmt.Errorf("challenge: wait_replicas must be a positive number of replicas, auto or off")
	}
	if timeout < 0 {
		return nil, fmt.Errorf("challenge: wait_replicas timeout must not be negative")
	}
	w := &replicaWait{known: map[string]replicaCount{}}
	switch {
	case want == RedisWaitOff:
		return w, nil
	case want > 0:
		w.n, w.strict = want, true
	default:
		w.n = 1
	}
	w.timeout = orDefault(timeout, DefaultRedisWaitTimeout)
	w.timeoutArg = max(w.timeout.Milliseconds(), 1)
	return w, nil
}

func (w *replicaWait) enabled() bool { return w.n > 0 }

// target is how many replicas a write on node must wait for now.
func (w *replicaWait) target(ctx context.Context, c redis.UniversalClient, node string) (int, error) {
	if w.strict || w.n == 0 {
		return w.n, nil
	}
	w.mu.Lock()
	rc, ok := w.known[node]
	w.mu.Unlock()
	if ok && time.Since(rc.at) < replicaRecheck {
		return min(w.n, rc.n), nil
	}
	n, err := w.refresh(ctx, c, node)
	if err != nil {
		return 0, err
	}
	return min(w.n, n), nil
}

// refresh asks node how many replicas it has connected.
func (w *replicaWait) refresh(ctx context.Context, c redis.UniversalClient, node string) (int, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		w.forget(node)
		return 0, fmt.Errorf("%w: INFO replication: %w", ErrStoreUnavailable, err)
	}
	v, _ := infoField(info, "connected_slaves")
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		// A master that will not say is treated as one with replicas:
		// the write then waits, and fails closed if none acknowledges.
		n = w.n
	}
	if node != "" {
		// A cluster node: the replicas the cluster would promote count.
		if k := clusterReplicas(ctx, c); k < 0 {
			n = max(n, w.n) // cannot tell: wait, and fail closed if none acknowledges
		} else {
			n = max(n, k)
		}
	}
	if w.sentinels != nil {
		// A replica the master lost but Sentinel would still promote
		// counts: writes wait for it, and fail closed while it is away.
		promotable, err := w.sentinels.count(ctx)
		if err != nil {
			promotable = w.n // cannot tell: wait, and fail closed if none acknowledges
		}
		n = max(n, promotable)
	}
	w.mu.Lock()
	w.known[node] = replicaCount{n: n, at: time.Now()}
	w.mu.Unlock()
	return n, nil
}

// forget drops what is known of node: after a failure the master may have
// changed (a failover), and its replicas must be counted again.
func (w *replicaWait) forget(node string) {
	w.mu.Lock()
	delete(w.known, node)
	w.mu.Unlock()
}

// master returns the client for the master that holds key, and its name
// for the replica counts: in a cluster, the node serving key's slot; else
// the store's own client, whose master the sentinels name.
func (s *RedisStore) master(ctx context.Context, key string) (redis.UniversalClient, string, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return s.client, "", nil
	}
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	return node, node.Options().Addr, nil
}

// failed notes a write that failed on node: the master may have moved
// (a failover), so its replicas are counted again and, in a cluster, the
// slots are looked up again.
func (s *RedisStore) failed(node string) {
	s.wait.forget(node)
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}

// durableSetNX is "SET key val NX PX ms" followed, on the same connection,
// by "WAIT n timeout" when replicas must acknowledge it. When too few do,
// the key is deleted again if it still holds val (the write was not relied
// on, so the same nonce may be tried again) and the error wraps
// ErrReplicasNotAcked and ErrStoreUnavailable.
//
// A nil val is a single-use marker's: "1", or a random token when the
// write waits (markerToken).
func (s *RedisStore) durableSetNX(ctx context.Context, key string, val any, ms int64) error {
	c, node, err := s.master(ctx, key)
	if err != nil {
		return s.health.note(err)
	}
	n, err := s.wait.target(ctx, c, node)
	if err != nil {
		s.failed(node)
		return s.health.note(err)
	}
	if n == 0 {
		if val == nil {
			val = "1"
		}
		// Through the store's client, which follows MOVED replies.
		return s.health.note(setNX(ctx, s.client, key, val, s.pxArg(ms)))
	}
	if val == nil {
		if val, err = markerToken(); err != nil {
			return err
		}
	}
	p := c.Pipeline()
	set := p.Do(ctx, "SET", key, val, "NX", "PX", s.pxArg(ms))
	wait := p.Do(ctx, "WAIT", n, s.wait.timeoutArg)
	_, _ = p.Exec(ctx)
	if err := setReply(set); err != nil {
		if isDown(err) {
			s.failed(node)
		}
		return s.health.note(foundUnacked(err))
	}
	if err := s.acked(ctx, c, node, wait, n); err != nil {
		// Not relied on: let the same name be written again. Best
		// effort; a failed delete leaves a record that expires by itself.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.wait.timeout)
		_ = delIfScript.Run(cctx, c, []string{key}, val).Err()
		cancel()
		return s.health.note(err)
	}
	return s.health.note(nil)
}

// durableGetDel is "GETDEL key" followed, on the same connection, by
// "WAIT n timeout" when replicas must acknowledge the deletion. When too
// few do, the record is gone from the master but the error wraps
// ErrReplicasNotAcked and ErrStoreUnavailable: the answer it held is not
// relied on, and the client starts again.
func (s *RedisStore) durableGetDel(ctx context.Context, key string) ([]byte, error) {
	c, node, err := s.master(ctx, key)
	if err != nil {
		return nil, s.health.note(err)
	}
	n, err := s.wait.target(ctx, c, node)
	if err != nil {
		s.failed(node)
		return nil, s.health.note(err)
	}
	if n == 0 {
		val, err := s.client.GetDel(ctx, key).Bytes()
		if err != nil && !errors.Is(err, redis.Nil) {
			s.failed(node)
			err = fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
		}
		return val, s.health.note(err)
	}
	p := c.Pipeline()
	get := p.GetDel(ctx, key)
	wait := p.Do(ctx, "WAIT", n, s.wait.timeoutArg)
	_, _ = p.Exec(ctx)
	val, err := get.Bytes()
	if errors.Is(err, redis.Nil) {
		// Nothing deleted: nothing to wait for.
		return nil, s.health.note(err)
	}
	if err != nil {
		s.failed(node)
		return nil, s.health.note(fmt.Errorf("%w: %w", ErrStoreUnavailable, err))
	}
	if err := s.acked(ctx, c, node, wait, n); err != nil {
		return nil, s.health.note(err)
	}
	return val, s.health.note(nil)
}

// acked checks WAIT's reply: at least n replicas acknowledged, or, in auto
// mode, as many as the master has connected now (asked again: after a
// failover, the new master may have none left).
func (s *RedisStore) acked(ctx context.Context, c redis.UniversalClient, node string, wait *redis.Cmd, n int) error {
	got, err := wait.Int64()
	if err != nil {
		s.failed(node)
		return fmt.Errorf("%w: WAIT: %w", ErrStoreUnavailable, err)
	}
	if int(got) >= n {
		return nil
	}
	if !s.wait.strict {
		if have, err := s.wait.refresh(ctx, c, node); err == nil && int(got) >= min(s.wait.n, have) {
			return nil
		}
	}
	s.health.waitTimeouts.Add(1)
	return fmt.Errorf("%w: %w (%d of %d within %v)", ErrStoreUnavailable, ErrReplicasNotAcked, got, n, s.wait.timeout)
}

// delIfScript deletes KEYS[1] if it holds ARGV[1]: one key, so it runs on
// any node of a cluster.
var delIfScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// markerToken is what a single-use marker holds where its write waits
// for replicas: a random token, so that a write refused for want of
// acknowledgement deletes only its own marker (delIfScript), never one
// another request made in the meantime. Elsewhere a marker holds "1".
func markerToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	return hex.EncodeToString(b[:]), nil
}

// RedisHealth is what a Redis store reports of its health (metrics).
type RedisHealth struct {
	// down is 1 while the last operation failed to reach Redis.
	down atomic.Bool
	// waitTimeouts counts single-use writes too few replicas acknowledged.
	waitTimeouts atomic.Uint64
	// failures counts operations that failed to reach Redis.
	failures atomic.Uint64
}

// note records err's outcome and returns it: an error wrapping
// ErrStoreUnavailable marks the store down, any other outcome (a full
// store's refusal too) up. A refusal because the request ended says
// nothing of the store and changes nothing.
func (h *RedisHealth) note(err error) error {
	if EndedByRequest(err) {
		return err
	}
	down := isDown(err)
	if down {
		h.failures.Add(1)
	}
	if h.down.Load() != down {
		h.down.Store(down)
	}
	return err
}

// RedisHealthSnapshot is a store's health at one moment.
type RedisHealthSnapshot struct {
	// Kind is the deployment kind (RedisStandalone, …).
	Kind string
	// Up: the last operation reached Redis (true before the first).
	Up bool
	// WaitTimeouts and Failures count since the store was made.
	WaitTimeouts, Failures uint64
}

// Health returns the store's health now.
func (s *RedisStore) Health() RedisHealthSnapshot {
	return RedisHealthSnapshot{
		Kind:         s.kind,
		Up:           !s.health.down.Load(),
		WaitTimeouts: s.health.waitTimeouts.Load(),
		Failures:     s.health.failures.Load(),
	}
}
