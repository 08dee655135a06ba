package challenge

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
)

// RedisConfig is the configuration of a Redis store as an operator writes
// it (the JSON of the edge's nonce_store redis): strings where RedisOptions
// has parsed values, file names where it has loaded certificates.
// Options turns it into RedisOptions.
type RedisConfig struct {
	// Redis URL of one server: redis://[[user]:password@]host:port[/db],
	// or rediss:// for TLS. The other fields win over what the URL says.
	// Placeholders such as {env.REDIS_URL} are replaced at provision time.
	URL string `json:"url,omitempty"`
	// host:port of one Redis server.
	Address string `json:"address,omitempty"`
	// host:port of the sentinels (with sentinel_master) or of cluster
	// nodes to start from (with cluster).
	Addresses []string `json:"addresses,omitempty"`
	// Name the sentinels monitor the master under: Sentinel mode.
	SentinelMaster string `json:"sentinel_master,omitempty"`
	// ACL user and password of the sentinels, when they have their own.
	SentinelUsername string `json:"sentinel_username,omitempty"`
	SentinelPassword string `json:"sentinel_password,omitempty"`
	// Cluster mode: addresses are nodes of a Redis Cluster.
	Cluster bool `json:"cluster,omitempty"`
	// ACL user name (Redis 6).
	Username string `json:"username,omitempty"`
	// Password; use a placeholder ({env.REDIS_PASSWORD},
	// {file./run/secrets/redis}) to keep it out of the config.
	Password string `json:"password,omitempty"`
	// Database number. Default: 0 (or the URL's).
	DB int `json:"db,omitempty"`
	// Connect with TLS (implied by a rediss:// URL).
	TLS bool `json:"tls,omitempty"`
	// Server name checked in the server's certificate. Default: the
	// address's host.
	TLSServerName string `json:"tls_server_name,omitempty"`
	// PEM file of the CA certificates that sign the server's certificate
	// (a private CA, as managed services use). Default: the system's.
	TLSCA string `json:"tls_ca,omitempty"`
	// PEM files of a client certificate and its key, for a server that
	// asks for one.
	TLSClientCert string `json:"tls_client_cert,omitempty"`
	TLSClientKey  string `json:"tls_client_key,omitempty"`
	// Most connections (per node of a cluster). Default: 10 per CPU.
	PoolSize int `json:"pool_size,omitempty"`
	// Replicas that must acknowledge a single-use write (a proof nonce,
	// a presentation's replay record, a challenge issued or consumed)
	// before it is relied on: "auto" (default: one, wherever the master
	// reports a connected replica), "off", or a number (required however
	// many replicas the master has). Too few in wait_timeout: 503.
	WaitReplicas string `json:"wait_replicas,omitempty"`
	// How long a single-use write waits for its replicas. Default: 250ms.
	WaitTimeout duration.Duration `json:"wait_timeout,omitempty"`
	// Prefix of every key. Default: "mcpi:challenge:".
	KeyPrefix string `json:"key_prefix,omitempty"`
	// Timeout of one Redis dial, read or write; an unreachable Redis fails
	// a handshake after about this long. Default: 1s to dial, 500ms to
	// read or write.
	Timeout duration.Duration `json:"timeout,omitempty"`
	// Start even though the server's maxmemory-policy may evict keys (any
	// policy but noeviction). An evicted key is a challenge, binding or
	// single-use record forgotten before its time: a used proof or
	// presentation could then be used again. Off by default: provisioning
	// fails on such a server, saying so.
	AcceptEviction bool `json:"accept_eviction,omitempty"`
	// How many challenges of proxied Level 3 handshakes (handshake
	// proxy) the store records per challenge lifetime under its key
	// prefix; past it, such a handshake is refused with 503 and nothing is
	// written. Redis needs room for about twice this many records of about
	// half a kilobyte each. Default DefaultProxyChallengeBound (100000).
	ProxiedChallenges int `json:"proxied_challenges,omitempty"`
}

// Options turns the configuration into the store's options, with expand
// applied to every value that may hold a placeholder (a secret, a host, a
// file name), and returns the key under which stores of the same options
// may be shared.
func (c RedisConfig) Options(expand func(string) string) (RedisOptions, string, error) {
	opts := RedisOptions{
		URL:               expand(c.URL),
		Addr:              expand(c.Address),
		MasterName:        expand(c.SentinelMaster),
		SentinelUsername:  expand(c.SentinelUsername),
		SentinelPassword:  expand(c.SentinelPassword),
		Cluster:           c.Cluster,
		Username:          expand(c.Username),
		Password:          expand(c.Password),
		DB:                c.DB,
		KeyPrefix:         c.KeyPrefix,
		PoolSize:          c.PoolSize,
		WaitTimeout:       time.Duration(c.WaitTimeout),
		AcceptEviction:    c.AcceptEviction,
		ProxiedChallenges: c.ProxiedChallenges,
	}
	for _, a := range c.Addresses {
		opts.Addrs = append(opts.Addrs, expand(a))
	}
	fail := func(format string, args ...any) (RedisOptions, string, error) {
		return RedisOptions{}, "", fmt.Errorf("mcpi: redis nonce store: "+format, args...)
	}
	switch {
	case opts.MasterName == "" && !opts.Cluster && opts.URL == "" && opts.Addr == "":
		return fail("url or address (one server), sentinel_master and addresses (Sentinel), or cluster and addresses is required")
	case (opts.MasterName != "" || opts.Cluster) && len(opts.Addrs) == 0:
		return fail("list the sentinels' or cluster nodes' host:port in addresses")
	case c.DB < 0:
		return fail("db must not be negative")
	case c.ProxiedChallenges < 0:
		return fail("proxied_challenges must not be negative")
	case c.Timeout < 0 || c.WaitTimeout < 0:
		return fail("timeout and wait_timeout must not be negative")
	case c.PoolSize < 0:
		return fail("pool_size must not be negative")
	}
	switch c.WaitReplicas {
	case "", "auto":
		opts.WaitReplicas = RedisWaitAuto
	case "off":
		opts.WaitReplicas = RedisWaitOff
	default:
		n, err := strconv.Atoi(c.WaitReplicas)
		if err != nil || n < 1 {
			return fail("wait_replicas must be auto, off or a positive number of replicas, got %q", c.WaitReplicas)
		}
		opts.WaitReplicas = n
	}
	if t := time.Duration(c.Timeout); t > 0 {
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = t, t, t, t
	}
	tlsOn := c.TLS || c.TLSServerName != "" || c.TLSCA != "" || c.TLSClientCert != ""
	if tlsOn {
		cfg, err := c.tlsConfig(expand)
		if err != nil {
			return fail("%v", err)
		}
		opts.TLS = cfg
	}
	// The key holds the secrets only as a hash: pool keys can end up in
	// debug output. Files are named, not read: a changed certificate is
	// picked up by a config with another name, or by restarting.
	sum := sha256.Sum256(fmt.Appendf(nil, "%q %q %q %q %q %q %t %q %q %d %t %q %q %q %q %q %d %d %q %d %t %d",
		opts.URL, opts.Addr, opts.Addrs, opts.MasterName, opts.SentinelUsername, opts.SentinelPassword, opts.Cluster,
		opts.Username, opts.Password, opts.DB, tlsOn, c.TLSServerName, c.TLSCA, c.TLSClientCert, c.TLSClientKey,
		opts.KeyPrefix, c.Timeout, c.PoolSize, c.WaitReplicas, c.WaitTimeout, c.AcceptEviction, c.ProxiedChallenges))
	return opts, "redis " + hex.EncodeToString(sum[:]), nil
}

// tlsConfig is the TLS configuration of the connections to Redis.
func (c RedisConfig) tlsConfig(expand func(string) string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: expand(c.TLSServerName)}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(expand(c.TLSCA))
		if err != nil {
			return nil, fmt.Errorf("tls_ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("tls_ca: no PEM certificate in the file")
		}
		cfg.RootCAs = pool
	}
	if (c.TLSClientCert == "") != (c.TLSClientKey == "") {
		return nil, errors.New("tls_client_cert and tls_client_key go together")
	}
	if c.TLSClientCert != "" {
		cert, err := tls.LoadX509KeyPair(expand(c.TLSClientCert), expand(c.TLSClientKey))
		if err != nil {
			return nil, fmt.Errorf("tls_client_cert/tls_client_key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
