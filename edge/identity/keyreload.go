package identity

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
func (id *Identity) reload(ctx context.Context) error {
	id.reloadMu.Lock()
	defer id.reloadMu.Unlock()
	return id.reloadLocked(ctx)
}

func (id *Identity) reloadLocked(ctx context.Context) error {
	ks, err := assertion.LoadOrCreateWithRetention(ctx, id.store, id.storageKey, id.retention, id.generate)
	if err != nil {
		return err
	}
	id.lastLoad = time.Now()
	id.ks.Store(ks)
	id.signersMu.Lock()
	defer id.signersMu.Unlock()
	for did, s := range id.signers {
		if err := s.SetKeySet(ks); err != nil {
			// Cannot happen (the retention covers the lifetime); drop the
			// signer so the next request builds one, or reports why not.
			delete(id.signers, did)
		}
	}
	id.logKeyChanges(ks)
	return nil
}

// logKeyChanges says when the key that signs, or the key scheduled to,
// differs from the last reload's: a scheduled key switches by the clock,
// so the switch is seen at the first reload after it. Callers hold
// reloadMu.
func (id *Identity) logKeyChanges(ks *assertion.KeySet) {
	now := time.Now()
	cur := ks.CurrentAt(now)
	if id.loggedCurrent != "" && id.loggedCurrent != cur.Thumbprint {
		id.logger.Info("edge signing key changed",
			zap.String("storage_key", id.storageKey),
			zap.String("thumbprint", cur.Thumbprint),
			zap.String("alg", cur.Alg))
	}
	id.loggedCurrent = cur.Thumbprint
	next, ok := ks.Pending(now)
	if ok && id.loggedNext != next.Thumbprint {
		id.logger.Info("next edge signing key published; it signs from signs_from",
			zap.String("storage_key", id.storageKey),
			zap.String("thumbprint", next.Thumbprint),
			zap.String("alg", next.Alg),
			zap.Time("signs_from", next.ActivatesAt))
	}
	id.loggedNext = next.Thumbprint
}

// reloadLoop reloads the key set every reloadEvery until cleanup, so a key
// rotated in the shared storage is used within one interval.
func (id *Identity) reloadLoop() {
	defer id.wg.Done()
	t := time.NewTicker(id.reloadEvery)
	defer t.Stop()
	for {
		select {
		case <-id.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(id.ctx, edgeKeyStorageTimeout)
			err := id.reload(ctx)
			cancel()
			if err != nil && id.ctx.Err() == nil {
				id.logger.Error("reloading the edge key set failed; signing with the keys loaded before",
					zap.String("storage_key", id.storageKey), zap.Error(err))
			}
		}
	}
}

// refreshForPublish reloads the key set before the JWKS or did.json is
// served, unless it was loaded less than a second ago. A verifier fetches
// the JWKS when it meets a kid it does not know, which may be a key another
// replica already signs with; this instance must then publish it too,
// without waiting for its next periodic reload.
func (id *Identity) refreshForPublish(ctx context.Context) {
	if id.store == nil {
		return
	}
	id.reloadMu.Lock()
	defer id.reloadMu.Unlock()
	if time.Since(id.lastLoad) < onDemandReload {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := id.reloadLocked(ctx); err != nil {
		id.lastLoad = time.Now() // do not retry on every request
		id.logger.Warn("reloading the edge key set for publication failed",
			zap.String("storage_key", id.storageKey), zap.Error(err))
	}
}
