package challenge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Watched is one configuration's view of a shared store: every operation
// goes to the store, and its failures to the store's Alarm, logged to the
// configuration's logger. The zero value has no store and fails closed
// (ErrStoreUnavailable): a module not provisioned, or whose provisioning
// failed, refuses rather than admits.
type Watched struct {
	store  NonceStore
	alarm  *Alarm
	logger *zap.Logger
	name   string
}

// Watch is s watched by alarm, logging to logger under the store's name.
func Watch(s NonceStore, alarm *Alarm, logger *zap.Logger, name string) Watched {
	return Watched{store: s, alarm: alarm, logger: logger, name: name}
}

func (w Watched) note(err error) error { return w.alarm.note(w.logger, w.name, err) }

var errNotProvisioned = fmt.Errorf("%w: not provisioned", ErrStoreUnavailable)

// Put implements NonceStore.
func (w Watched) Put(ctx context.Context, nonce string, rec Record, ttl time.Duration) error {
	if w.store == nil {
		return errNotProvisioned
	}
	return w.note(w.store.Put(ctx, nonce, rec, ttl))
}

// Consume implements NonceStore.
func (w Watched) Consume(ctx context.Context, nonce string) (Record, error) {
	if w.store == nil {
		return Record{}, errNotProvisioned
	}
	rec, err := w.store.Consume(ctx, nonce)
	return rec, w.note(err)
}

// Peek implements Peeker; a store without Peek makes it unsupported (the
// handshake then consumes first).
func (w Watched) Peek(ctx context.Context, nonce string) (Record, error) {
	if w.store == nil {
		return Record{}, errNotProvisioned
	}
	p, ok := w.store.(Peeker)
	if !ok {
		return Record{}, w.note(fmt.Errorf("mcpi: nonce store cannot peek: %w", errors.ErrUnsupported))
	}
	rec, err := p.Peek(ctx, nonce)
	return rec, w.note(err)
}

// UseOnce implements SingleUse; a store without markers makes it
// unsupported (the caller then puts a record).
func (w Watched) UseOnce(ctx context.Context, digest [32]byte, ttl time.Duration) error {
	if w.store == nil {
		return errNotProvisioned
	}
	su, ok := w.store.(SingleUse)
	if !ok {
		return fmt.Errorf("mcpi: nonce store keeps no single-use markers: %w", errors.ErrUnsupported)
	}
	return w.note(su.UseOnce(ctx, digest, ttl))
}

// Bind implements SessionBinder.
func (w Watched) Bind(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	b, ok := w.store.(SessionBinder)
	if !ok {
		return errNotProvisioned
	}
	return w.note(b.Bind(ctx, key, value, ttl))
}

// Lookup implements SessionBinder.
func (w Watched) Lookup(ctx context.Context, key string) ([]byte, error) {
	b, ok := w.store.(SessionBinder)
	if !ok {
		return nil, errNotProvisioned
	}
	v, err := b.Lookup(ctx, key)
	return v, w.note(err)
}

// BindOwned implements OwnedBinder.
func (w Watched) BindOwned(ctx context.Context, kind, owner, key string, value []byte, ttl time.Duration, max int) error {
	b, ok := w.store.(OwnedBinder)
	if !ok {
		return errNotProvisioned
	}
	return b.BindOwned(ctx, kind, owner, key, value, ttl, max)
}

// Take implements OwnedBinder.
func (w Watched) Take(ctx context.Context, key string) ([]byte, error) {
	b, ok := w.store.(OwnedBinder)
	if !ok {
		return nil, errNotProvisioned
	}
	return b.Take(ctx, key)
}

// Interface guards
var (
	_ NonceStore  = Watched{}
	_ Peeker      = Watched{}
	_ SingleUse   = Watched{}
	_ OwnedBinder = Watched{}
)
