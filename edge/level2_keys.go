package edge

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
func (rt *l2runtime) loadKeys(ctx context.Context, c *Level2Config, st assertion.Storage) error {
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
		ks, err := assertion.NewKeySet(priv, time.Now(), assertion.WithRetention(rt.retention))
		if err != nil {
			return fmt.Errorf("mcpi: signing_key %s: %v", path, err)
		}
		if alg := ks.Current().Alg; c.SigningAlg != "" && c.SigningAlg != alg {
			return fmt.Errorf("mcpi: signing_alg is %s but signing_key holds an %s key", c.SigningAlg, alg)
		}
		rt.ks.Store(ks)
		return nil
	}

	if st == nil {
		priv, err := rt.generate()
		if err != nil {
			return err
		}
		ks, err := assertion.NewKeySet(priv, time.Now(), assertion.WithRetention(rt.retention))
		if err != nil {
			return err
		}
		rt.logger.Debug("no Caddy storage in this context: the edge signing key lives in memory only and is not shared")
		rt.ks.Store(ks)
		return nil
	}
	rt.store, rt.storageKey = st, c.keyStorageKey()
	lctx, cancel := context.WithTimeout(ctx, edgeKeyStorageTimeout)
	defer cancel()
	if err := rt.reload(lctx); err != nil {
		return fmt.Errorf("mcpi: edge key set %q: %v", rt.storageKey, err)
	}
	if cur := rt.ks.Load().Current(); cur.Alg != rt.alg {
		rt.logger.Warn("the stored edge key does not use signing_alg; run `caddy mcpi rotate-key` to change it",
			zap.String("stored_alg", cur.Alg), zap.String("signing_alg", rt.alg))
	}
	rt.wg.Add(1)
	go rt.reloadLoop()
	return nil
}

// generate makes a new private key of the configured algorithm.
func (rt *l2runtime) generate() (crypto.PrivateKey, error) { return GenerateEdgeKey(rt.alg) }

func GenerateEdgeKey(alg string) (crypto.PrivateKey, error) {
	if alg == AlgES256 {
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	return priv, err
}

// cleanupLevel2 runs from Cleanup, also after a partial Provision: it
// stops the reload loop and the probes and waits for them.
func (h *Handler) cleanupLevel2() error {
	rt := h.l2.rt
	if rt == nil {
		return nil
	}
	if rt.probe != nil {
		rt.probe.stop()
	}
	rt.cancel()
	rt.wg.Wait()
	if rt.probe != nil {
		rt.probe.client.CloseIdleConnections()
	}
	if rt.rep != nil {
		rt.rep.client.CloseIdleConnections()
	}
	h.l2.rt = nil
	return nil
}
