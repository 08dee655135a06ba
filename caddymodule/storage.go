package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
)

// edgeKeyStorage adapts Caddy's storage (a certmagic.Storage, from
// ctx.Storage()) to assertion.Storage. certmagic.Storage already has the
// methods; the adapter pins the contract assertion relies on: a missing key
// is an error wrapping fs.ErrNotExist, whatever the storage module returns.
type edgeKeyStorage struct{ s certmagic.Storage }

func (k edgeKeyStorage) Load(ctx context.Context, key string) ([]byte, error) {
	b, err := k.s.Load(ctx, key)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !k.s.Exists(ctx, key) {
		err = fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return b, err
}

func (k edgeKeyStorage) Store(ctx context.Context, key string, value []byte) error {
	return k.s.Store(ctx, key, value)
}

func (k edgeKeyStorage) Lock(ctx context.Context, name string) error { return k.s.Lock(ctx, name) }

func (k edgeKeyStorage) Unlock(ctx context.Context, name string) error { return k.s.Unlock(ctx, name) }

func (k edgeKeyStorage) Exists(ctx context.Context, key string) bool { return k.s.Exists(ctx, key) }

// storageFromContext returns the storage of the running config, or nil for
// a context made without one (caddy.NewContext in unit tests), whose
// Storage method would dereference a nil config.
func storageFromContext(ctx caddy.Context) (st certmagic.Storage) {
	defer func() {
		if recover() != nil {
			st = nil
		}
	}()
	return ctx.Storage()
}

var _ assertion.Storage = edgeKeyStorage{}
