package edge

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
)

const (
	// edgeKeyStorageTimeout bounds one load (or create) of the key set, lock
	// included, so that a stuck storage fails provisioning instead of
	// hanging it.
	edgeKeyStorageTimeout = 30 * time.Second
	// onDemandReload is the least time between two reloads triggered by
	// requests for the edge's keys (see refreshForPublish).
	onDemandReload = time.Second
)

// reload loads the key set from storage (creating it there if it vanished,
// raising its retention if it is shorter than ours) and hands it to every
// signer. A set that cannot be decoded is an error and the current one
// stays in use.
func (rt *l2runtime) reload(ctx context.Context) error {
	rt.reloadMu.Lock()
	defer rt.reloadMu.Unlock()
	return rt.reloadLocked(ctx)
}

func (rt *l2runtime) reloadLocked(ctx context.Context) error {
	ks, err := assertion.LoadOrCreateWithRetention(ctx, rt.store, rt.storageKey, rt.retention, rt.generate)
	if err != nil {
		return err
	}
	rt.lastLoad = time.Now()
	old := rt.ks.Swap(ks)
	rt.signersMu.Lock()
	defer rt.signersMu.Unlock()
	for did, s := range rt.signers {
		if err := s.SetKeySet(ks); err != nil {
			// Cannot happen (the retention covers the lifetime); drop the
			// signer so the next request builds one, or reports why not.
			delete(rt.signers, did)
		}
	}
	if old != nil && old.Current().Thumbprint != ks.Current().Thumbprint {
		rt.logger.Info("edge signing key changed",
			zap.String("storage_key", rt.storageKey),
			zap.String("thumbprint", ks.Current().Thumbprint),
			zap.String("alg", ks.Current().Alg))
	}
	return nil
}

// reloadLoop reloads the key set every reloadEvery until cleanup, so a key
// rotated in the shared storage is used within one interval.
func (rt *l2runtime) reloadLoop() {
	defer rt.wg.Done()
	t := time.NewTicker(rt.reloadEvery)
	defer t.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(rt.ctx, edgeKeyStorageTimeout)
			err := rt.reload(ctx)
			cancel()
			if err != nil && rt.ctx.Err() == nil {
				rt.logger.Error("reloading the edge key set failed; signing with the keys loaded before",
					zap.String("storage_key", rt.storageKey), zap.Error(err))
			}
		}
	}
}

// refreshForPublish reloads the key set before the JWKS or did.json is
// served, unless it was loaded less than a second ago. A verifier fetches
// the JWKS when it meets a kid it does not know, which may be a key another
// replica already signs with; this instance must then publish it too,
// without waiting for its next periodic reload.
func (rt *l2runtime) refreshForPublish(ctx context.Context) {
	if rt.store == nil {
		return
	}
	rt.reloadMu.Lock()
	defer rt.reloadMu.Unlock()
	if time.Since(rt.lastLoad) < onDemandReload {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rt.reloadLocked(ctx); err != nil {
		rt.lastLoad = time.Now() // do not retry on every request
		rt.logger.Warn("reloading the edge key set for publication failed",
			zap.String("storage_key", rt.storageKey), zap.Error(err))
	}
}
