package caddymodule

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

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
)

// options turns the module's fields into the store's options, placeholders
// replaced, and the key the store is pooled under.
func (s *RedisNonceStore) options() (challenge.RedisOptions, string, error) {
	repl := caddy.NewReplacer()
	opts := challenge.RedisOptions{
		URL:              repl.ReplaceAll(s.URL, ""),
		Addr:             repl.ReplaceAll(s.Address, ""),
		MasterName:       repl.ReplaceAll(s.SentinelMaster, ""),
		SentinelUsername: repl.ReplaceAll(s.SentinelUsername, ""),
		SentinelPassword: repl.ReplaceAll(s.SentinelPassword, ""),
		Cluster:          s.Cluster,
		Username:         repl.ReplaceAll(s.Username, ""),
		Password:         repl.ReplaceAll(s.Password, ""),
		DB:               s.DB,
		KeyPrefix:        s.KeyPrefix,
		PoolSize:         s.PoolSize,
		WaitTimeout:      time.Duration(s.WaitTimeout),
		AcceptEviction:   s.AcceptEviction,
	}
	for _, a := range s.Addresses {
		opts.Addrs = append(opts.Addrs, repl.ReplaceAll(a, ""))
	}
	fail := func(format string, args ...any) (challenge.RedisOptions, string, error) {
		return challenge.RedisOptions{}, "", fmt.Errorf("mcpi: redis nonce store: "+format, args...)
	}
	switch {
	case opts.MasterName == "" && !opts.Cluster && opts.URL == "" && opts.Addr == "":
		return fail("url or address (one server), sentinel_master and addresses (Sentinel), or cluster and addresses is required")
	case (opts.MasterName != "" || opts.Cluster) && len(opts.Addrs) == 0:
		return fail("list the sentinels' or cluster nodes' host:port in addresses")
	case s.DB < 0:
		return fail("db must not be negative")
	case s.Timeout < 0 || s.WaitTimeout < 0:
		return fail("timeout and wait_timeout must not be negative")
	case s.PoolSize < 0:
		return fail("pool_size must not be negative")
	}
	switch s.WaitReplicas {
	case "", "auto":
		opts.WaitReplicas = challenge.RedisWaitAuto
	case "off":
		opts.WaitReplicas = challenge.RedisWaitOff
	default:
		n, err := strconv.Atoi(s.WaitReplicas)
		if err != nil || n < 1 {
			return fail("wait_replicas must be auto, off or a positive number of replicas, got %q", s.WaitReplicas)
		}
		opts.WaitReplicas = n
	}
	if t := time.Duration(s.Timeout); t > 0 {
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = t, t, t, t
	}
	tlsOn := s.TLS || s.TLSServerName != "" || s.TLSCA != "" || s.TLSClientCert != ""
	if tlsOn {
		cfg, err := s.tlsConfig(repl)
		if err != nil {
			return fail("%v", err)
		}
		opts.TLS = cfg
	}
	// The key holds the secrets only as a hash: pool keys can end up in
	// debug output. Files are named, not read: a changed certificate is
	// picked up by a config with another name, or by restarting.
	sum := sha256.Sum256(fmt.Appendf(nil, "%q %q %q %q %q %q %t %q %q %d %t %q %q %q %q %q %d %d %q %d %t",
		opts.URL, opts.Addr, opts.Addrs, opts.MasterName, opts.SentinelUsername, opts.SentinelPassword, opts.Cluster,
		opts.Username, opts.Password, opts.DB, tlsOn, s.TLSServerName, s.TLSCA, s.TLSClientCert, s.TLSClientKey,
		opts.KeyPrefix, s.Timeout, s.PoolSize, s.WaitReplicas, s.WaitTimeout, s.AcceptEviction))
	return opts, "redis " + hex.EncodeToString(sum[:]), nil
}

// tlsConfig is the TLS configuration of the connections to Redis.
func (s *RedisNonceStore) tlsConfig(repl *caddy.Replacer) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: repl.ReplaceAll(s.TLSServerName, "")}
	if s.TLSCA != "" {
		pem, err := os.ReadFile(repl.ReplaceAll(s.TLSCA, ""))
		if err != nil {
			return nil, fmt.Errorf("tls_ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("tls_ca: no PEM certificate in the file")
		}
		cfg.RootCAs = pool
	}
	if (s.TLSClientCert == "") != (s.TLSClientKey == "") {
		return nil, errors.New("tls_client_cert and tls_client_key go together")
	}
	if s.TLSClientCert != "" {
		cert, err := tls.LoadX509KeyPair(repl.ReplaceAll(s.TLSClientCert, ""), repl.ReplaceAll(s.TLSClientKey, ""))
		if err != nil {
			return nil, fmt.Errorf("tls_client_cert/tls_client_key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// healthReporter is what registerHealth reads: the pooled Redis store.
type healthReporter interface {
	Health() challenge.RedisHealthSnapshot
}

// registerHealth adds the store's health to the configuration's metrics
// (observe.RegisterStoreHealth).
func (s *RedisNonceStore) registerHealth(ctx caddy.Context, key string) error {
	hr, ok := s.store.(healthReporter)
	reg := ctx.GetMetricsRegistry()
	if !ok || reg == nil {
		return nil
	}
	return observe.RegisterStoreHealth(reg, key, func() observe.StoreHealth {
		h := hr.Health()
		return observe.StoreHealth{Kind: h.Kind, Up: h.Up, Failures: h.Failures, WaitTimeouts: h.WaitTimeouts}
	})
}
