package identity

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"go.uber.org/zap"
)

// loadKeys sets up the key set: from the signing_key file, else from the
// storage (created there if absent, reloaded periodically), else, for a
// bare context without a config (unit tests), a key held in memory only.
func (id *Identity) loadKeys(ctx context.Context, c *Config, st assertion.Storage) error {
	if c.SigningKey != "" {
		path := c.SigningKey
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("mcpi: reading signing_key: %v", err)
		}
		priv, err := assertion.ParsePrivateKey(data)
		if err != nil {
			return fmt.Errorf("mcpi: signing_key %s: %v", path, err)
		}
		ks, err := assertion.NewKeySet(priv, time.Now(), assertion.WithRetention(id.retention))
		if err != nil {
			return fmt.Errorf("mcpi: signing_key %s: %v", path, err)
		}
		if alg := ks.Current().Alg; c.SigningAlg != "" && c.SigningAlg != alg {
			return fmt.Errorf("mcpi: signing_alg is %s but signing_key holds an %s key", c.SigningAlg, alg)
		}
		id.ks.Store(ks)
		return nil
	}

	if st == nil {
		priv, err := id.generate()
		if err != nil {
			return err
		}
		ks, err := assertion.NewKeySet(priv, time.Now(), assertion.WithRetention(id.retention))
		if err != nil {
			return err
		}
		id.logger.Debug("no key storage: the edge signing key lives in memory only and is not shared")
		id.ks.Store(ks)
		return nil
	}
	id.store, id.storageKey = st, c.keyStorageKey()
	lctx, cancel := context.WithTimeout(ctx, edgeKeyStorageTimeout)
	defer cancel()
	if err := id.reload(lctx); err != nil {
		return fmt.Errorf("mcpi: edge key set %q: %v", id.storageKey, err)
	}
	if cur := id.ks.Load().Current(); cur.Alg != id.alg {
		id.logger.Warn("the stored edge key does not use signing_alg; run `caddy mcpi rotate-key` to change it",
			zap.String("stored_alg", cur.Alg), zap.String("signing_alg", id.alg))
	}
	id.wg.Add(1)
	go id.reloadLoop()
	return nil
}

// generate makes a new private key of the configured algorithm.
func (id *Identity) generate() (crypto.PrivateKey, error) { return GenerateKey(id.alg) }

// GenerateKey makes a new signing key for alg: AlgES256 gives a P-256 key,
// anything else an Ed25519 key.
func GenerateKey(alg string) (crypto.PrivateKey, error) {
	if alg == AlgES256 {
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	return priv, err
}

// Close stops the reload loop and the probes and waits for them. It is safe
// to call more than once, and after a failed New.
func (id *Identity) Close() error {
	if id.probe != nil {
		id.probe.stop()
	}
	id.cancel()
	id.wg.Wait()
	if id.probe != nil {
		id.probe.client.CloseIdleConnections()
	}
	if id.rep != nil {
		id.rep.client.CloseIdleConnections()
	}
	return nil
}
