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

// RedisOptions configure NewRedisStore. Either URL or Addr is required;
// fields set explicitly win over the URL's.
type RedisOptions struct {
	// URL is "redis://[[user]:password@]host:port[/db]", or "rediss://…"
	// for TLS.
	URL string
	// Addr is "host:port".
	Addr     string
	Username string
	Password string
	DB       int
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
	// PoolSize is the maximum number of connections. Default: go-redis's
	// (10 per GOMAXPROCS).
	PoolSize int
}

// RedisStore is a NonceStore shared by every replica through one Redis
// (≥ 6.2): Put is "SET key value NX PX ttl", Consume is "GETDEL key", so a
// challenge is consumed at most once across replicas; Peek is "GET key";
// UseOnce is "SET key 1 NX PX ttl". Every Redis failure
// is returned wrapped in ErrStoreUnavailable. The client reconnects by
// itself: when Redis comes back, the same store works again.
type RedisStore struct {
	client *redis.Client
	prefix string
	// lastPX is the PX argument of the last SET, already in an interface:
	// go-redis takes its arguments as []any, and an int64 put in one is
	// copied to the heap, one allocation per SET. The TTL is the same on
	// every call of one verifier (its nonce window), so the boxed value is
	// kept and reused while the TTL stays the same. A boxed value cannot be
	// changed, so sharing it between calls is safe.
	lastPX atomic.Pointer[boxedMillis]
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
	if ro.Addr == "" {
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
	ro.ReadTimeout = orDefault(opts.ReadTimeout, DefaultRedisReadTimeout)
	ro.WriteTimeout = orDefault(opts.WriteTimeout, DefaultRedisWriteTimeout)
	ro.PoolTimeout = orDefault(opts.PoolTimeout, DefaultRedisPoolTimeout)
	if opts.PoolSize > 0 {
		ro.PoolSize = opts.PoolSize
	}
	// One retry, so a pooled connection broken by a Redis restart is
	// replaced transparently; one dial attempt per try, so a dead Redis
	// fails fast.
	ro.MaxRetries = 1
	ro.DialerRetries = 1
	ro.ContextTimeoutEnabled = true
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}

	prefix := opts.KeyPrefix
	if prefix == "" {
		prefix = DefaultRedisKeyPrefix
	}
	return &RedisStore{client: redis.NewClient(ro), prefix: prefix}, nil
}

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
	return s.setNX(ctx, s.prefix+nonce, val, ms)
}

// setNX is "SET key val NX PX ms": ErrNonceExists when key is set.
func (s *RedisStore) setNX(ctx context.Context, key, val any, ms int64) error {
	res, err := s.client.Do(ctx, "SET", key, val, "NX", "PX", s.pxArg(ms)).Result()
	if errors.Is(err, redis.Nil) {
		return ErrNonceExists
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	if str, ok := res.(string); !ok || str != "OK" {
		return fmt.Errorf("%w: unexpected SET reply", ErrStoreUnavailable)
	}
	return nil
}

// Consume implements NonceStore with GETDEL.
func (s *RedisStore) Consume(ctx context.Context, nonce string) (Record, error) {
	if isReservedName(nonce) {
		return Record{}, ErrNonceNotFound
	}
	val, err := s.client.GetDel(ctx, s.prefix+nonce).Bytes()
	if errors.Is(err, redis.Nil) {
		return Record{}, ErrNonceNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
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
		return Record{}, ErrNonceNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	return decodeRecord(val)
}

// isReservedName reports whether a nonce would name a session binding's or
// a single-use marker's key: both share the key prefix, and a nonce chosen
// by a client must never read, consume (GETDEL) or take the place of one.
func isReservedName(nonce string) bool {
	return strings.HasPrefix(nonce, redisBindingPrefix) || strings.HasPrefix(nonce, redisSingleUsePrefix)
}

// redisSingleUsePrefix follows the store's key prefix for single-use
// markers, then the digest in hex: the name KYA-OS request proof nonces
// were stored under as records, so that replicas of either version,
// sharing one Redis, see each other's.
const redisSingleUsePrefix = "kyaos-rp:"

// UseOnce implements SingleUse with one "SET <prefix>kyaos-rp:<hex> 1 NX
// PX ttl": a marker has no record to encode.
func (s *RedisStore) UseOnce(ctx context.Context, digest [32]byte, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if ms <= 0 {
		return fmt.Errorf("challenge: redis store: ttl must be at least 1ms")
	}
	key := make([]byte, 0, len(s.prefix)+len(redisSingleUsePrefix)+hex.EncodedLen(len(digest)))
	key = append(append(key, s.prefix...), redisSingleUsePrefix...)
	key = hex.AppendEncode(key, digest[:])
	return s.setNX(ctx, key, "1", ms)
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
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	return nil
}

// Close closes the client's connections.
func (s *RedisStore) Close() error { return s.client.Close() }

var (
	_ NonceStore = (*RedisStore)(nil)
	_ Peeker     = (*RedisStore)(nil)
	_ SingleUse  = (*RedisStore)(nil)
)
