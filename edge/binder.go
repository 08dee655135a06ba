package edge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
)

// measuredBinder times every binding operation, in the same histogram as
// the nonce store's (caddy_mcpi_nonce_store_duration_seconds, operations
// "bind" and "lookup").
type measuredBinder struct {
	binder challenge.SessionBinder
	name   string
	obs    *observe.Recorder
}

func (m *measuredBinder) Bind(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	start := time.Now()
	err := m.binder.Bind(ctx, key, value, ttl)
	m.obs.NonceStore(m.name, "bind", time.Since(start), endedOr(err))
	return err
}

// BindOwned implements challenge.OwnedBinder when the store does; a store
// without owned bindings fails closed (the caller then keeps nothing).
func (m *measuredBinder) BindOwned(ctx context.Context, kind, owner, key string, value []byte, ttl time.Duration, max int) error {
	ob, ok := m.binder.(challenge.OwnedBinder)
	if !ok {
		return fmt.Errorf("%w: nonce store %s keeps no owned bindings", challenge.ErrStoreUnavailable, m.name)
	}
	start := time.Now()
	err := ob.BindOwned(ctx, kind, owner, key, value, ttl, max)
	m.obs.NonceStore(m.name, "bind", time.Since(start), endedOr(err))
	return err
}

// Take implements challenge.OwnedBinder when the store does.
func (m *measuredBinder) Take(ctx context.Context, key string) ([]byte, error) {
	ob, ok := m.binder.(challenge.OwnedBinder)
	if !ok {
		return nil, fmt.Errorf("%w: nonce store %s keeps no owned bindings", challenge.ErrStoreUnavailable, m.name)
	}
	start := time.Now()
	val, err := ob.Take(ctx, key)
	failure := err
	if errors.Is(err, challenge.ErrBindingNotFound) {
		failure = nil
	}
	m.obs.NonceStore(m.name, "take", time.Since(start), endedOr(failure))
	return val, err
}

func (m *measuredBinder) Lookup(ctx context.Context, key string) ([]byte, error) {
	start := time.Now()
	val, err := m.binder.Lookup(ctx, key)
	failure := err
	if errors.Is(err, challenge.ErrBindingNotFound) {
		failure = nil // a normal answer
	}
	m.obs.NonceStore(m.name, "lookup", time.Since(start), endedOr(failure))
	return val, err
}

// Interface guards
var (
	_ challenge.OwnedBinder = (*measuredBinder)(nil)
)
