package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
)

func init() {
	caddy.RegisterModule(MemoryNonceStore{})
	caddy.RegisterModule(RedisNonceStore{})
}

// nonceStores holds the live challenge stores, keyed by their
// configuration (the memory store by none: there is one), across config
// reloads: a reload provisions new modules,
// and without the pool it would drop every challenge issued but not yet
// answered (and, for Redis, reconnect).
var nonceStores = caddy.NewUsagePool()

// pooledStore adapts a challenge store to caddy.Destructor: when the last
// config using it is unloaded, the store is closed (the memory store's
// janitor stops, the Redis client's connections close).
type pooledStore struct {
	challenge.NonceStore
	close func() error
	// alarm logs the store's outages, at most once in a while whichever
	// configuration's request met them.
	alarm *challenge.Alarm
}

func (p pooledStore) Destruct() error { return p.close() }

// poolStore loads the store under key from the pool, or builds it.
func poolStore(key string, build func() (pooledStore, error)) (pooledStore, error) {
	val, _, err := nonceStores.LoadOrNew(key, func() (caddy.Destructor, error) {
		p, err := build()
		if err != nil {
			return nil, err
		}
		p.alarm = new(challenge.Alarm)
		return p, nil
	})
	if err != nil {
		return pooledStore{}, err
	}
	return val.(pooledStore), nil
}

// releaseStore drops one reference to the pooled store under *key; safe to
// call twice, and after a failed Provision (empty key).
func releaseStore(key *string) error {
	if *key == "" {
		return nil
	}
	_, err := nonceStores.Delete(*key)
	*key = ""
	return err
}

// MemoryNonceStore keeps issued challenges in this process: bounded,
// expiring, single use. Right for one Caddy instance; replicas behind a
// load balancer need a shared store (redis), or a challenge issued by one
// could be answered at the other only if it happened to land there, and
// replayed at each of them once.
type MemoryNonceStore struct {
	// Most challenges held at once. When full, a handshake fails (503)
	// rather than evicting a live challenge. Default: 100000. The process
	// has one memory store, kept across reloads, whose bound is the
	// largest max_entries of the configurations using it.
	MaxEntries int `json:"max_entries,omitempty"`

	// Watched carries the store's operations, and fails closed before
	// Provision.
	challenge.Watched
	store challenge.NonceStore
	key   string
	bound int
}

// CaddyModule returns the Caddy module information.
func (MemoryNonceStore) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "mcpi.nonce_stores.memory",
		New: func() caddy.Module { return new(MemoryNonceStore) },
	}
}

// Provision loads or creates the shared store for this configuration.
func (m *MemoryNonceStore) Provision(ctx caddy.Context) error {
	if m.MaxEntries < 0 {
		return errors.New("mcpi: memory nonce store: max_entries must not be negative")
	}
	n := m.MaxEntries
	if n == 0 {
		n = challenge.DefaultMemoryMaxEntries
	}
	// One memory store per process, whatever its bound: a reload that
	// changes max_entries must not start an empty store, or every proof
	// nonce used in the last minute could be used once more (and pending
	// challenges would be lost). Its bound is the largest of the live
	// configurations' (memoryBounds).
	const key = "memory"
	p, err := poolStore(key, func() (pooledStore, error) {
		// The store outlives the config that created it (that is what the
		// pool is for), so its janitor is not tied to that config's
		// context; Destruct stops it when the last user is gone.
		s := challenge.NewMemoryStore(context.Background(), challenge.WithMaxEntries(n))
		return pooledStore{NonceStore: s, close: s.Close}, nil
	})
	if err != nil {
		return fmt.Errorf("mcpi: memory nonce store: %v", err)
	}
	store := p.NonceStore
	m.store, m.key, m.bound = store, key, n
	m.Watched = challenge.Watch(store, p.alarm, ctx.Logger(), "memory")
	memoryBounds.Add(store, n)
	return nil
}

// Cleanup releases this config's hold on the store.
func (m *MemoryNonceStore) Cleanup() error {
	if m.key != "" {
		memoryBounds.Remove(m.store, m.bound)
	}
	return releaseStore(&m.key)
}

// memoryBounds sets the process's memory store's bound to the largest
// max_entries of the live memory store modules.
var memoryBounds challenge.Bounds

// UnmarshalCaddyfile sets up the store from Caddyfile tokens:
//
//	nonce_store memory [<max_entries>]
//	nonce_store memory {
//		max_entries <n>
//	}
func (m *MemoryNonceStore) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // "memory"
	if d.NextArg() {
		if err := parseMaxEntries(d, &m.MaxEntries); err != nil {
			return err
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "max_entries":
			if m.MaxEntries != 0 {
				return d.Err("max_entries already specified")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			if err := parseMaxEntries(d, &m.MaxEntries); err != nil {
				return err
			}
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized memory nonce store option %q", d.Val())
		}
	}
	return nil
}

// parseMaxEntries reads the argument at d.
func parseMaxEntries(d *caddyfile.Dispenser, dst *int) (err error) {
	*dst, err = positiveInt(d, d.Val(), "max_entries must be a positive integer")
	return err
}

// RedisNonceStore keeps issued challenges in Redis (6.2 or later) or
// Valkey, shared by every replica: a challenge issued by one Caddy can be
// answered at any other, and only once across all of them (SET NX to
// store, GETDEL to consume). One server (url or address), a master watched
// by Redis Sentinel (sentinel_master and the sentinels' addresses) or a
// Redis Cluster (cluster and some nodes' addresses). If Redis cannot be
// reached, handshakes fail closed (HTTP 503, JSON-RPC -32000) and work
// again by themselves when it is back, on the new master after a failover.
type RedisNonceStore struct {
	// The JSON fields: the server, credentials, TLS, timeouts, replicas to
	// wait for and the eviction policy to accept.
	challenge.RedisConfig

	// Watched carries the store's operations, and fails closed before
	// Provision.
	challenge.Watched
	store *challenge.RedisStore
	key   string
}

// CaddyModule returns the Caddy module information.
func (RedisNonceStore) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "mcpi.nonce_stores.redis",
		New: func() caddy.Module { return new(RedisNonceStore) },
	}
}

// Provision loads or creates the shared client for this configuration and
// checks that the server does not evict keys (challenge.RedisStore.CheckEviction). Caddy starts
// while Redis is down (with a warning that the check could not be made),
// and what needs the store fails closed until it is up.
func (s *RedisNonceStore) Provision(ctx caddy.Context) error {
	repl := caddy.NewReplacer()
	opts, key, err := s.Options(func(v string) string { return repl.ReplaceAll(v, "") })
	if err != nil {
		return err
	}
	p, err := poolStore(key, func() (pooledStore, error) {
		rs, err := challenge.NewRedisStore(opts)
		if err != nil {
			return pooledStore{}, err
		}
		return pooledStore{NonceStore: rs, close: rs.Close}, nil
	})
	if err != nil {
		return fmt.Errorf("mcpi: redis nonce store: %v", err)
	}
	logger := ctx.Logger()
	s.key = key
	s.store, _ = p.NonceStore.(*challenge.RedisStore)
	err = s.store.CheckEviction(ctx, logger, opts)
	if err == nil {
		err = s.registerHealth(ctx, key)
	}
	if err != nil {
		_ = releaseStore(&s.key)
		s.store = nil
		return err
	}
	s.Watched = challenge.Watch(s.store, p.alarm, logger, "redis")
	return nil
}

// Cleanup releases this config's hold on the client.
func (s *RedisNonceStore) Cleanup() error { return releaseStore(&s.key) }

// UnmarshalCaddyfile sets up the store from Caddyfile tokens:
//
//	nonce_store redis <url>
//	nonce_store redis [<url>] {
//		url <url>
//		address <host:port>
//		sentinel <master_name> <host:port>...
//		sentinel_username <user>
//		sentinel_password <password>
//		cluster <host:port>...
//		username <user>
//		password <password>
//		db <n>
//		tls
//		tls_server_name <name>
//		tls_ca <file>
//		tls_client_cert <file>
//		tls_client_key <file>
//		key_prefix <prefix>
//		timeout <duration>
//		pool_size <n>
//		wait_replicas auto|off|<n> [<timeout>]
//		accept_eviction
//		proxied_challenges <n>
//	}
func (s *RedisNonceStore) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // "redis"
	if d.NextArg() {
		s.URL = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		name := d.Val()
		if seen[name] || (name == "url" && s.URL != "") {
			return d.Errf("%s already specified", name)
		}
		seen[name] = true
		args := d.RemainingArgs()
		switch name {
		case "tls", "accept_eviction":
			if len(args) != 0 {
				return d.ArgErr()
			}
			s.TLS = s.TLS || name == "tls"
			s.AcceptEviction = s.AcceptEviction || name == "accept_eviction"
			continue
		case "sentinel", "cluster":
			if seen["sentinel"] && seen["cluster"] {
				return d.Err("sentinel and cluster exclude each other: a deployment is one or the other")
			}
			if len(args) < 1 || (name == "sentinel" && len(args) < 2) {
				return d.Errf("%s needs %s", name, map[string]string{
					"sentinel": "the master's name and at least one sentinel's host:port",
					"cluster":  "at least one node's host:port"}[name])
			}
			if name == "sentinel" {
				s.SentinelMaster, args = args[0], args[1:]
			} else {
				s.Cluster = true
			}
			s.Addresses = args
			continue
		case "wait_replicas":
			if len(args) < 1 || len(args) > 2 {
				return d.ArgErr()
			}
			if n, err := strconv.Atoi(args[0]); args[0] != "auto" && args[0] != "off" && (err != nil || n < 1) {
				return d.Errf("wait_replicas must be auto, off or a positive number of replicas, got %q", args[0])
			}
			s.WaitReplicas = args[0]
			if len(args) == 2 {
				if args[0] == "off" {
					return d.Err("wait_replicas off takes no timeout")
				}
				dur, err := caddy.ParseDuration(args[1])
				if err != nil || dur <= 0 {
					return d.Errf("wait_replicas: invalid timeout %q", args[1])
				}
				s.WaitTimeout = duration.Duration(dur)
			}
			continue
		case "db", "pool_size", "timeout", "proxied_challenges":
			if len(args) != 1 {
				return d.ArgErr()
			}
			if err := s.parseNumber(d, name, args[0]); err != nil {
				return err
			}
			continue
		}
		field, ok := map[string]*string{
			"url": &s.URL, "address": &s.Address, "username": &s.Username, "password": &s.Password,
			"sentinel_username": &s.SentinelUsername, "sentinel_password": &s.SentinelPassword,
			"tls_server_name": &s.TLSServerName, "tls_ca": &s.TLSCA, "tls_client_cert": &s.TLSClientCert,
			"tls_client_key": &s.TLSClientKey, "key_prefix": &s.KeyPrefix,
		}[name]
		if !ok {
			return d.Errf("unrecognized redis nonce store option %q", name)
		}
		if len(args) != 1 {
			return d.ArgErr()
		}
		*field = args[0]
	}
	single := s.URL != "" || s.Address != ""
	switch {
	case !single && s.SentinelMaster == "" && !s.Cluster:
		return d.Err("redis nonce store: url or address (one server), sentinel or cluster is required")
	case single && (s.SentinelMaster != "" || s.Cluster):
		return d.Err("redis nonce store: url and address name one server; with sentinel or cluster, list the addresses there")
	}
	return nil
}

// parseNumber sets db, pool_size, proxied_challenges or timeout from the
// Caddyfile's value v.
func (s *RedisNonceStore) parseNumber(d *caddyfile.Dispenser, name, v string) error {
	if name == "timeout" {
		dur, err := caddy.ParseDuration(v)
		if err != nil || dur <= 0 {
			return d.Errf("timeout: invalid duration %q", v)
		}
		s.Timeout = duration.Duration(dur)
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || (name != "db" && n == 0) {
		return d.Errf("%s must be a %s integer, got %q", name, map[string]string{"db": "non-negative"}[name]+map[bool]string{true: "positive"}[name != "db"], v)
	}
	*map[string]*int{"db": &s.DB, "pool_size": &s.PoolSize, "proxied_challenges": &s.ProxiedChallenges}[name] = n
	return nil
}

// Interface guards
var (
	_ challenge.NonceStore  = (*MemoryNonceStore)(nil)
	_ challenge.Peeker      = (*MemoryNonceStore)(nil)
	_ challenge.SingleUse   = (*MemoryNonceStore)(nil)
	_ challenge.OwnedBinder = (*MemoryNonceStore)(nil)
	_ challenge.Peeker      = (*RedisNonceStore)(nil)
	_ challenge.SingleUse   = (*RedisNonceStore)(nil)
	_ challenge.OwnedBinder = (*RedisNonceStore)(nil)
	_ caddy.Provisioner     = (*MemoryNonceStore)(nil)
	_ caddy.CleanerUpper    = (*MemoryNonceStore)(nil)
	_ caddyfile.Unmarshaler = (*MemoryNonceStore)(nil)
	_ challenge.NonceStore  = (*RedisNonceStore)(nil)
	_ caddy.Provisioner     = (*RedisNonceStore)(nil)
	_ caddy.CleanerUpper    = (*RedisNonceStore)(nil)
	_ caddyfile.Unmarshaler = (*RedisNonceStore)(nil)
)
