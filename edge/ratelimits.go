package edge

import (
	"fmt"

	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
)

// Rate limits and quotas on admitted MCP calls: the limiter is built here
// over the route's store, and the tool policy step (edge/toolpolicy)
// checks each request against it.

// RateLimitConfig holds the rate limit settings.
type RateLimitConfig struct {
	// Rate limits and quotas, each counted per agent DID, user DID, tool,
	// or a combination: ratelimit.Limit. Every limit applies; a request
	// over any of them gets 429. With a redis nonce store the counters are
	// shared by every replica using it; otherwise each replica counts on
	// its own, in memory.
	RateLimits []ratelimit.Limit `json:"rate_limits,omitempty"`

	// Let requests through when the limits' store cannot be reached (or
	// the in-memory one is full). Off: they are refused with 503, as the
	// edge refuses whatever it cannot check.
	RateLimitFailOpen bool `json:"rate_limit_fail_open,omitempty"`
}

func (c *RateLimitConfig) validateRateLimits() error {
	for _, l := range c.RateLimits {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("mcpi: %v", err)
		}
	}
	return nil
}

// provisionRateLimits builds the limiter over the nonce store's Redis
// client when it has one, else over the process's memory store.
func (h *Handler) provisionRateLimits() error {
	if len(h.cfg.RateLimits) == 0 {
		return nil
	}
	given := h.nonceStore // as given, not measured
	if given == nil {
		given = h.ownStore
	}
	store, prefix := ratelimit.StoreFor(given)
	var m *ratelimit.Metrics
	if h.registerer != nil {
		var err error
		if m, err = ratelimit.NewMetrics(h.registerer); err != nil {
			return err
		}
	}
	l, err := ratelimit.New(h.cfg.RateLimits, store, ratelimit.Options{Prefix: prefix, FailOpen: h.cfg.RateLimitFailOpen, Metrics: m})
	if err != nil {
		return fmt.Errorf("mcpi: %v", err)
	}
	h.limiter = l
	return nil
}
