package authserver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// Revocation is per refresh family: every credential renewed from one
// consent carries the family as its delegation id, and revoking any of
// them (or a refresh token, or a reused refresh token) revokes them all.
// The record is a binding in the shared store, so every replica sees it;
// a replica remembers a "not revoked" answer for revocationCacheTTL at
// most, which bounds how long a revoked credential is still admitted.
const (
	revokedPrefix      = "oauth-revoked:"
	revocationCacheTTL = 2 * time.Second
	maxRevocationCache = 4096
)

type revocations struct {
	store Store

	mu    sync.Mutex
	clean map[string]time.Time // family -> not revoked until
}

func newRevocations(st Store) *revocations {
	return &revocations{store: st, clean: make(map[string]time.Time)}
}

func (rv *revocations) revoke(ctx context.Context, family string, ttl time.Duration) error {
	rv.mu.Lock()
	delete(rv.clean, family)
	rv.mu.Unlock()
	return rv.store.Bind(ctx, revokedPrefix+family, []byte{1}, ttl)
}

// revoked reports whether family is revoked; a store failure is an error
// (the caller fails closed).
func (rv *revocations) revoked(ctx context.Context, family string) (bool, error) {
	now := time.Now()
	rv.mu.Lock()
	until, ok := rv.clean[family]
	rv.mu.Unlock()
	if ok && now.Before(until) {
		return false, nil
	}
	_, err := rv.store.Lookup(ctx, revokedPrefix+family)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, challenge.ErrBindingNotFound):
		return false, err
	}
	rv.mu.Lock()
	if len(rv.clean) >= maxRevocationCache {
		rv.clean = make(map[string]time.Time)
	}
	rv.clean[family] = now.Add(revocationCacheTTL)
	rv.mu.Unlock()
	return false, nil
}

// Revoked reports whether the credential with delegation id family, which
// this server issued, was revoked. The edge calls it for every credential
// whose issuer is one of its users.
func (s *Server) Revoked(ctx context.Context, family string) (bool, error) {
	rv, err := s.revoked.revoked(ctx, family)
	if err == nil && !rv {
		s.lastUse.note(ctx, s.deps.Store, family, time.Now(), s.cfg.RefreshLifetime)
	}
	return rv, err
}

// forget drops a "not revoked" answer this replica remembers for family.
func (rv *revocations) forget(family string) {
	rv.mu.Lock()
	delete(rv.clean, family)
	rv.mu.Unlock()
}
