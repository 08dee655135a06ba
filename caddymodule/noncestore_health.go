package caddymodule

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
)

// registerHealth adds the store's health to the configuration's metrics
// (observe.RegisterStoreHealth).
func (s *RedisNonceStore) registerHealth(ctx caddy.Context, key string) error {
	reg := ctx.GetMetricsRegistry()
	if s.store == nil || reg == nil {
		return nil
	}
	return observe.RegisterStoreHealth(reg, key, func() observe.StoreHealth {
		h := s.store.Health()
		return observe.StoreHealth{Kind: h.Kind, Up: h.Up, Failures: h.Failures, WaitTimeouts: h.WaitTimeouts}
	})
}
