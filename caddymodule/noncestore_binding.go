package caddymodule

import (
	"context"
	"fmt"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// The nonce store modules also keep proxy-mode session bindings
// (challenge.SessionBinder), so that replicas sharing a store share them.

// Bind implements challenge.SessionBinder.
func (m *MemoryNonceStore) Bind(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	b, err := binderOf(m.store)
	if err != nil {
		return err
	}
	return m.alarm.note(b.Bind(ctx, key, value, ttl))
}

// Lookup implements challenge.SessionBinder.
func (m *MemoryNonceStore) Lookup(ctx context.Context, key string) ([]byte, error) {
	b, err := binderOf(m.store)
	if err != nil {
		return nil, err
	}
	v, err := b.Lookup(ctx, key)
	return v, m.alarm.note(err)
}

// Bind implements challenge.SessionBinder.
func (s *RedisNonceStore) Bind(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	b, err := binderOf(s.store)
	if err != nil {
		return err
	}
	return s.alarm.note(b.Bind(ctx, key, value, ttl))
}

// Lookup implements challenge.SessionBinder.
func (s *RedisNonceStore) Lookup(ctx context.Context, key string) ([]byte, error) {
	b, err := binderOf(s.store)
	if err != nil {
		return nil, err
	}
	v, err := b.Lookup(ctx, key)
	return v, s.alarm.note(err)
}

// BindOwned implements challenge.OwnedBinder.
func (m *MemoryNonceStore) BindOwned(ctx context.Context, kind, owner, key string, value []byte, ttl time.Duration, max int) error {
	return bindOwned(ctx, m.store, kind, owner, key, value, ttl, max)
}

// BindOwned implements challenge.OwnedBinder.
func (s *RedisNonceStore) BindOwned(ctx context.Context, kind, owner, key string, value []byte, ttl time.Duration, max int) error {
	return bindOwned(ctx, s.store, kind, owner, key, value, ttl, max)
}

// Take implements challenge.OwnedBinder.
func (m *MemoryNonceStore) Take(ctx context.Context, key string) ([]byte, error) {
	return take(ctx, m.store, key)
}

// Take implements challenge.OwnedBinder.
func (s *RedisNonceStore) Take(ctx context.Context, key string) ([]byte, error) {
	return take(ctx, s.store, key)
}

func take(ctx context.Context, s challenge.NonceStore, key string) ([]byte, error) {
	b, ok := s.(challenge.OwnedBinder)
	if !ok {
		return nil, fmt.Errorf("%w: not provisioned", challenge.ErrStoreUnavailable)
	}
	return b.Take(ctx, key)
}

func bindOwned(ctx context.Context, s challenge.NonceStore, kind, owner, key string, value []byte, ttl time.Duration, max int) error {
	b, ok := s.(challenge.OwnedBinder)
	if !ok {
		return fmt.Errorf("%w: not provisioned", challenge.ErrStoreUnavailable)
	}
	return b.BindOwned(ctx, kind, owner, key, value, ttl, max)
}

// Interface guards
var (
	_ challenge.OwnedBinder = (*MemoryNonceStore)(nil)
	_ challenge.OwnedBinder = (*RedisNonceStore)(nil)
)

// binderOf is the pooled store's binder; an unprovisioned module has none.
func binderOf(s challenge.NonceStore) (challenge.SessionBinder, error) {
	b, ok := s.(challenge.SessionBinder)
	if !ok {
		return nil, fmt.Errorf("%w: not provisioned", challenge.ErrStoreUnavailable)
	}
	return b, nil
}
