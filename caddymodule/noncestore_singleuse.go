package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// The nonce store modules also keep single-use markers (challenge.SingleUse:
// KYA-OS request proof nonces), which their stores hold apart from records.

// UseOnce implements challenge.SingleUse.
func (m *MemoryNonceStore) UseOnce(ctx context.Context, digest [32]byte, ttl time.Duration) error {
	return m.alarm.note(useOnce(ctx, m.store, digest, ttl))
}

// UseOnce implements challenge.SingleUse.
func (s *RedisNonceStore) UseOnce(ctx context.Context, digest [32]byte, ttl time.Duration) error {
	return s.alarm.note(useOnce(ctx, s.store, digest, ttl))
}

// useOnce marks digest in s, the pooled store of a module; an
// unprovisioned module has none, and a store without markers makes it
// unsupported (the caller then puts a record).
func useOnce(ctx context.Context, s challenge.NonceStore, digest [32]byte, ttl time.Duration) error {
	if s == nil {
		return fmt.Errorf("%w: not provisioned", challenge.ErrStoreUnavailable)
	}
	su, ok := s.(challenge.SingleUse)
	if !ok {
		return fmt.Errorf("mcpi: nonce store keeps no single-use markers: %w", errors.ErrUnsupported)
	}
	return su.UseOnce(ctx, digest, ttl)
}

// Interface guards
var (
	_ challenge.SingleUse = (*MemoryNonceStore)(nil)
	_ challenge.SingleUse = (*RedisNonceStore)(nil)
)
