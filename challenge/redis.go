package challenge

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Redis store defaults. Timeouts are short so that an unreachable Redis
// fails a request quickly (closed, with ErrStoreUnavailable) instead of
// holding it.
const (
	DefaultRedisKeyPrefix    = "mcpi:challenge:"
	DefaultRedisDialTimeout  = time.Second
	DefaultRedisReadTimeout  = 500 * time.Millisecond
	DefaultRedisWriteTimeout = 500 * time.Millisecond
	DefaultRedisPoolTimeout  = time.Second
)

// RedisOptions configure NewRedisStore. A standalone server is named by
// URL or Addr (fields set explicitly win over the URL's); a Sentinel-managed
// master by MasterName and the sentinels' Addrs; a Redis Cluster by Cluster
// and some of its nodes' Addrs.
type RedisOptions struct {
	// URL is "redis://[[user]:password@]host:port[/db]", or "rediss://…"
	// for TLS: a standalone server.
	URL string
	// Addr is "host:port" of a standalone server.
	Addr string
	// Addrs are the sentinels (with MasterName) or cluster nodes to start
	// from (with Cluster), as "host:port".
	Addrs []string
	// MasterName is the name the sentinels monitor the master under.
	MasterName string
	// SentinelUsername and SentinelPassword authenticate to the sentinels,
	// when they ask for it (their own ACL, apart from the master's).
	SentinelUsername, SentinelPassword string
	// Cluster: Addrs are nodes of a Redis Cluster.
	Cluster  bool
	Username string
	Password string
	// DB is the database number; a cluster has only database 0.
	DB int
	// TLS enables TLS with this configuration (set by a rediss:// URL when
	// nil).
	TLS *tls.Config
	// KeyPrefix is prepended to every nonce. Default "mcpi:challenge:".
	KeyPrefix string
	// Timeouts; defaults DefaultRedis*Timeout.
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	PoolTimeout  time.Duration
	// PoolSize is the maximum number of connections (per node of a
	// cluster). Default: go-redis's (10 per GOMAXPROCS).
	PoolSize int
	// WaitReplicas is how many replicas must acknowledge a single-use
	// record before it counts as written (RedisWaitAuto, RedisWaitOff, or
	// a number: redis_wait.go).
	WaitReplicas int
	// WaitTimeout bounds that wait. Default DefaultRedisWaitTimeout.
	WaitTimeout time.Duration
	// AcceptEviction lets single-use writes be made whatever the server's
	// maxmemory-policy; without it they are refused (ErrEvictionRisk)
	// unless the policy is known to be noeviction
	// (redis_eviction_guard.go).
	AcceptEviction bool
	// ProxiedChallenges, when positive, bounds the proxied handshake
	// challenges recorded per challenge lifetime in place of the bound the
	// challenge service asks for (redis_proxycount.go).
	ProxiedChallenges int
	// EvictionCheckInterval is how often the policy is read again.
	// Default DefaultEvictionCheckInterval.
	EvictionCheckInterval time.Duration
}

// Deployment kinds, as Kind reports them.
const (
	RedisStandalone = "standalone"
	RedisSentinel   = "sentinel"
	RedisCluster    = "cluster"
)

// RedisStore is a NonceStore shared by every replica through one Redis
// (≥ 6.2), Sentinel-managed master or Redis Cluster: Put is "SET key value
// NX PX ttl", Consume is "GETDEL key", so a challenge is consumed at most
// once across replicas; Peek is "GET key"; UseOnce is "SET key 1 NX PX
// ttl". Every command touches one key, so any key may live on any node of
// a cluster. Every Redis failure is returned wrapped in
// ErrStoreUnavailable. The client reconnects by itself, and follows a
// failover (a new master named by the sentinels, slots moved in a
// cluster): when Redis comes back, the same store works again.
type RedisStore struct {
	client redis.UniversalClient
	kind   string
	prefix string
	// wait is the replica acknowledgement policy of single-use writes.
	wait *replicaWait
	// health counts what the operator should see of the store (metrics).
	health *RedisHealth
	// evict allows single-use writes only on a server known not to evict
	// keys; nil with AcceptEviction.
	evict *evictionGuard
	// lastPX is the PX argument of the last SET, already in an interface:
	// go-redis takes its arguments as []any, and an int64 put in one is
	// copied to the heap, one allocation per SET. The TTL is the same on
	// every call of one verifier (its nonce window), so the boxed value is
	// kept and reused while the TTL stays the same. A boxed value cannot be
	// changed, so sharing it between calls is safe.
	lastPX atomic.Pointer[boxedMillis]
	// batch writes single-use markers by group commit (redis_batch.go);
	// nil for a cluster, where each is its own command.
	batch *markerBatcher
	// recent refuses a replay of a marker this process saw without a
	// round trip (recent.go).
	recent *recentMarkers
	// proxied is the operator's bound on proxied challenges; 0: the
	// service's.
	proxied int
}

// boxedMillis is a PX argument in milliseconds and the same value boxed.
type boxedMillis struct {
	ms  int64
	arg any
}

// pxArg returns ms as SET's PX argument, boxed once per distinct value.
func (s *RedisStore) pxArg(ms int64) any {
	if b := s.lastPX.Load(); b != nil && b.ms == ms {
		return b.arg
	}
	b := &boxedMillis{ms: ms, arg: ms}
	s.lastPX.Store(b)
	return b.arg
}

// NewRedisStore returns a store using opts. It does not contact Redis (use
// Ping for a health check), so it succeeds while Redis is down.
func NewRedisStore(opts RedisOptions) (*RedisStore, error) {
	kind := RedisStandalone
	switch {
	case opts.MasterName != "" && opts.Cluster:
		return nil, fmt.Errorf("challenge: a Redis master name (Sentinel) and a cluster exclude each other: choose one")
	case opts.MasterName != "":
		kind = RedisSentinel
	case opts.Cluster:
		kind = RedisCluster
	}
	if kind != RedisStandalone {
		if opts.URL != "" || opts.Addr != "" {
			return nil, fmt.Errorf("challenge: a Redis URL or single address names a standalone server; list the %ss' addresses instead", map[string]string{RedisSentinel: "sentinel", RedisCluster: "cluster node"}[kind])
		}
		if len(opts.Addrs) == 0 {
			return nil, fmt.Errorf("challenge: Redis %s needs at least one address", kind)
		}
		if kind == RedisCluster && opts.DB != 0 {
			return nil, fmt.Errorf("challenge: a Redis Cluster has only database 0")
		}
	} else if len(opts.Addrs) > 0 {
		return nil, fmt.Errorf("challenge: several Redis addresses need a Sentinel master name or cluster mode")
	}
	if opts.DB < 0 {
		return nil, fmt.Errorf("challenge: Redis database number must not be negative")
	}
	wait, err := newReplicaWait(kind, opts.WaitReplicas, opts.WaitTimeout)
	if err != nil {
		return nil, err
	}
	ro := &redis.Options{}
	if opts.URL != "" {
		u, err := url.Parse(opts.URL)
		if err != nil {
			// url.Error repeats the URL, which may hold a password.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, fmt.Errorf("challenge: invalid Redis URL: %v", err)
		}
		if u.Scheme != "redis" && u.Scheme != "rediss" {
			return nil, fmt.Errorf("challenge: Redis URL scheme must be redis or rediss")
		}
		parsed, err := redis.ParseURL(opts.URL)
		if err != nil {
			return nil, fmt.Errorf("challenge: invalid Redis URL")
		}
		ro = parsed
	}
	if opts.Addr != "" {
		ro.Addr = opts.Addr
	}
	if kind == RedisStandalone && ro.Addr == "" {
		return nil, fmt.Errorf("challenge: Redis address required")
	}
	if opts.Username != "" {
		ro.Username = opts.Username
	}
	if opts.Password != "" {
		ro.Password = opts.Password
	}
	if opts.DB != 0 {
		ro.DB = opts.DB
	}
	if opts.TLS != nil {
		ro.TLSConfig = opts.TLS
	}
	ro.Network = "tcp"
	ro.DialTimeout = orDefault(opts.DialTimeout, DefaultRedisDialTimeout)
	// A read waits for WAIT's answer too, which may take its whole timeout.
	ro.ReadTimeout = orDefault(opts.ReadTimeout, DefaultRedisReadTimeout) + wait.timeout
	ro.WriteTimeout = orDefault(opts.WriteTimeout, DefaultRedisWriteTimeout)
	ro.PoolTimeout = orDefault(opts.PoolTimeout, DefaultRedisPoolTimeout)
	if opts.PoolSize > 0 {
		ro.PoolSize = opts.PoolSize
	}
	// No retry: a SET NX (or GETDEL) retried after its reply was late or
	// its connection died may find its own first attempt, and refuse a
	// first use as a replay (401); failing it (503) is the honest answer,
	// and the client retries with a fresh proof. One dial attempt, so a
	// dead Redis fails fast.
	ro.MaxRetries = -1
	ro.DialerRetries = 1
	ro.ContextTimeoutEnabled = true
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}

	prefix := opts.KeyPrefix
	if prefix == "" {
		prefix = DefaultRedisKeyPrefix
	}
	s := &RedisStore{kind: kind, prefix: prefix, wait: wait, health: new(RedisHealth), recent: newRecentMarkers(maxRecentMarkers),
		proxied: opts.ProxiedChallenges}
	if !opts.AcceptEviction {
		s.evict = &evictionGuard{cluster: kind == RedisCluster, done: make(chan struct{})}
		ro.OnConnect = s.onConnect
	}
	switch kind {
	case RedisSentinel:
		if wait.enabled() && !wait.strict {
			wait.sentinels = newSentinelReplicas(opts.MasterName, opts.Addrs, opts.SentinelUsername, opts.SentinelPassword, ro)
		}
		s.client = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: opts.MasterName, SentinelAddrs: opts.Addrs,
			SentinelUsername: opts.SentinelUsername, SentinelPassword: opts.SentinelPassword,
			Username: ro.Username, Password: ro.Password, DB: ro.DB, TLSConfig: ro.TLSConfig,
			DialTimeout: ro.DialTimeout, ReadTimeout: ro.ReadTimeout, WriteTimeout: ro.WriteTimeout,
			PoolTimeout: ro.PoolTimeout, PoolSize: ro.PoolSize,
			MaxRetries: ro.MaxRetries, DialerRetries: ro.DialerRetries,
			ContextTimeoutEnabled: true, DisableIdentity: true,
			OnConnect: ro.OnConnect,
		})
	case RedisCluster:
		s.client = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:    opts.Addrs,
			Username: ro.Username, Password: ro.Password, TLSConfig: ro.TLSConfig,
			DialTimeout: ro.DialTimeout, ReadTimeout: ro.ReadTimeout, WriteTimeout: ro.WriteTimeout,
			PoolTimeout: ro.PoolTimeout, PoolSize: ro.PoolSize,
			MaxRetries: ro.MaxRetries, DialerRetries: ro.DialerRetries,
			ContextTimeoutEnabled: true, DisableIdentity: true,
			MaintNotificationsConfig: ro.MaintNotificationsConfig,
			OnConnect:                ro.OnConnect,
			// A failover moves slots: look again soon rather than in a
			// minute (go-redis also looks again on every MOVED reply).
			ClusterStateReloadInterval: 5 * time.Second,
		})
	default:
		s.client = redis.NewClient(ro)
	}
	if kind != RedisCluster {
		s.batch = newMarkerBatcher(s, ro.ReadTimeout)
	}
	if s.evict != nil {
		ctx, stop := context.WithCancel(context.Background())
		s.evict.stop = stop
		// Long enough for one dial and one command, retried once.
		go s.recheck(ctx, orDefault(opts.EvictionCheckInterval, DefaultEvictionCheckInterval), 2*(ro.DialTimeout+ro.ReadTimeout))
	}
	return s, nil
}

// Kind is the deployment kind: RedisStandalone, RedisSentinel or
// RedisCluster.
func (s *RedisStore) Kind() string { return s.kind }

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Put implements NonceStore with SET key value NX PX ttl.
func (s *RedisStore) Put(ctx context.Context, nonce string, rec Record, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return fmt.Errorf("challenge: redis store: ttl must be at least 1ms")
	}
	if isReservedName(nonce) {
		return ErrNonceExists // a binding's or a marker's name, never a nonce's
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("challenge: redis store: encoding record: %w", err)
	}
	if err := s.allow(ctx); err != nil {
		return err
	}
	return s.written(s.setNX(ctx, s.prefix+nonce, val, ms))
}

// setNX is "SET key val NX PX ms" on the key's master, waiting for its
// replicas where the store does (redis_wait.go): ErrNonceExists when key is
// set.
func (s *RedisStore) setNX(ctx context.Context, key string, val any, ms int64) error {
	if s.wait.enabled() {
		return s.durableSetNX(ctx, key, val, ms)
	}
	return s.health.note(setNX(ctx, s.client, key, val, s.pxArg(ms)))
}

// setNX is "SET key val NX PX px" on c.
func setNX(ctx context.Context, c redis.UniversalClient, key string, val, px any) error {
	return setReply(c.Do(ctx, "SET", key, val, "NX", "PX", px))
}

// setReply reads the reply of SET NX: ErrNonceExists when the key was set.
func setReply(cmd *redis.Cmd) error {
	res, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return ErrNonceExists
	}
	if err != nil {
		return redisWriteError(err)
	}
	if str, ok := res.(string); !ok || str != "OK" {
		return fmt.Errorf("%w: unexpected SET reply", ErrStoreUnavailable)
	}
	return nil
}

// Consume implements NonceStore with GETDEL, waiting for the key's
// replicas where the store does.
func (s *RedisStore) Consume(ctx context.Context, nonce string) (Record, error) {
	if isReservedName(nonce) {
		return Record{}, ErrNonceNotFound
	}
	var val []byte
	var err error
	if s.wait.enabled() {
		val, err = s.durableGetDel(ctx, s.prefix+nonce)
	} else {
		val, err = s.client.GetDel(ctx, s.prefix+nonce).Bytes()
		if err != nil && !errors.Is(err, redis.Nil) {
			err = fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
		}
		s.health.note(err)
	}
	if errors.Is(err, redis.Nil) {
		return Record{}, ErrNonceNotFound
	}
	if err != nil {
		return Record{}, err
	}
	return decodeRecord(val)
}

// Peek implements Peeker with GET.
func (s *RedisStore) Peek(ctx context.Context, nonce string) (Record, error) {
	if isReservedName(nonce) {
		return Record{}, ErrNonceNotFound
	}
	val, err := s.client.Get(ctx, s.prefix+nonce).Bytes()
	if errors.Is(err, redis.Nil) {
		return Record{}, s.health.note(ErrNonceNotFound)
	}
	if err != nil {
		return Record{}, s.health.note(fmt.Errorf("%w: %w", ErrStoreUnavailable, err))
	}
	s.health.note(nil)
	return decodeRecord(val)
}

// isReservedName reports whether a nonce would name a session binding's, a
// single-use marker's, a rate limit counter's or the proxied challenges'
// counter's key: they share the key prefix, and a nonce chosen by a client
// must never read, consume (GETDEL) or take the place of one.
func isReservedName(nonce string) bool {
	return strings.HasPrefix(nonce, redisBindingPrefix) || strings.HasPrefix(nonce, redisSingleUsePrefix) ||
		strings.HasPrefix(nonce, redisRateLimitPrefix) || strings.HasPrefix(nonce, redisProxyCountPrefix)
}

// redisSingleUsePrefix follows the store's key prefix for single-use
// markers, then the digest in hex: the name KYA-OS request proof nonces
// were stored under as records, so that replicas of either version,
// sharing one Redis, see each other's.
const redisSingleUsePrefix = "kyaos-rp:"

// UseOnce implements SingleUse with one "SET <prefix>kyaos-rp:<hex> 1 NX
// PX ttl": a marker has no record to encode (where the write waits for
// replicas, it holds a random token instead of 1: markerToken). Outside a
// cluster, concurrent markers share one pipeline (redis_batch.go). A
// replay of a marker this process wrote or found is refused without a
// round trip (recent.go).
func (s *RedisStore) UseOnce(ctx context.Context, digest [32]byte, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return fmt.Errorf("challenge: redis store: ttl must be at least 1ms")
	}
	now := time.Now()
	if s.recent.seen(digest, now) {
		return ErrNonceExists // a replay to this replica: no round trip
	}
	err := s.useOnce(ctx, digest, ms)
	if err == nil || s.settled(err) {
		s.recent.add(digest, now, ttl)
	}
	return err
}

// Seen implements SeenLocally from the filter of markers this process
// wrote or found settled (recent.go): those another replica wrote and
// this one has not met are not known here.
func (s *RedisStore) Seen(digest [32]byte) bool {
	return s.recent.seen(digest, time.Now())
}

// settled reports whether err, a replay Redis reported, refuses the
// digest for good: the marker was found by a write that did not wait for
// replicas (errFoundUnacked). One found by a write that waited may be
// another edge replica's whose write is not yet acknowledged, and is
// taken back if it never is: then the proof may be tried again, and a
// filter that remembered it would refuse it for its whole lifetime.
func (s *RedisStore) settled(err error) bool {
	return errors.Is(err, ErrNonceExists) && !errors.Is(err, ErrStoreUnavailable) && !errors.Is(err, errFoundUnacked)
}

// errFoundUnacked wraps ErrNonceExists for a marker found by a write that
// waits for replicas: the marker may be another write's that is not yet
// acknowledged, and may still be taken back.
var errFoundUnacked = fmt.Errorf("%w (found while replicas must acknowledge writes: "+
	"it may be another edge replica's write, taken back if they do not)", ErrNonceExists)

// foundUnacked marks err, a SET NX reply of a write that waited for
// replicas, as errFoundUnacked when it found the key set.
func foundUnacked(err error) error {
	if errors.Is(err, ErrNonceExists) && !errors.Is(err, ErrStoreUnavailable) {
		return errFoundUnacked
	}
	return err
}

// useOnce is UseOnce's write.
func (s *RedisStore) useOnce(ctx context.Context, digest [32]byte, ms int64) error {
	if err := s.allow(ctx); err != nil {
		return err
	}
	if s.batch != nil {
		return s.written(s.batch.use(ctx, digest, s.pxArg(ms)))
	}
	key := make([]byte, 0, len(s.prefix)+len(redisSingleUsePrefix)+hex.EncodedLen(len(digest)))
	key = append(append(key, s.prefix...), redisSingleUsePrefix...)
	key = hex.AppendEncode(key, digest[:])
	if s.wait.enabled() {
		return s.written(s.durableSetNX(ctx, string(key), nil, ms))
	}
	return s.written(s.health.note(setNX(ctx, s.client, string(key), "1", s.pxArg(ms))))
}

// decodeRecord decodes a stored record; a value that is not one (a
// foreign writer under our prefix) counts as absent.
func decodeRecord(val []byte) (Record, error) {
	var rec Record
	if err := json.Unmarshal(val, &rec); err != nil {
		return Record{}, ErrNonceNotFound
	}
	return rec, nil
}

// Ping checks that Redis answers. Errors wrap ErrStoreUnavailable.
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return s.health.note(fmt.Errorf("%w: %w", ErrStoreUnavailable, err))
	}
	return s.health.note(nil)
}

// Close stops the eviction policy checks and closes the client's
// connections.
func (s *RedisStore) Close() error {
	if s.batch != nil {
		s.batch.close()
	}
	if s.wait.sentinels != nil {
		s.wait.sentinels.close()
	}
	if s.evict != nil {
		s.evict.stop()
		<-s.evict.done
	}
	return s.client.Close()
}

var (
	_ NonceStore = (*RedisStore)(nil)
	_ Peeker     = (*RedisStore)(nil)
	_ SingleUse  = (*RedisStore)(nil)
)
