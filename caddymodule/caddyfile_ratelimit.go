package caddymodule

import (
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
)

// RateLimitConfig is the JSON form of edge.RateLimitConfig, which
// documents each field (and docs/configuration.md each setting).
type RateLimitConfig struct {
	// Rate limits and quotas on admitted MCP calls, each per agent DID,
	// user DID, tool or a combination. A request over any gets 429.
	RateLimits []RateLimit `json:"rate_limits,omitempty"`
	// Let requests through when the limits' store cannot be reached.
	// Default: refused with 503.
	RateLimitFailOpen bool `json:"rate_limit_fail_open,omitempty"`
}

// RateLimit is the JSON form of ratelimit.Limit: rate calls per `per` for
// each distinct key, burst at most at once.
type RateLimit struct {
	// "agent", "user", "tool", or several of them.
	Key []string `json:"key"`
	// Calls per period.
	Rate int `json:"rate"`
	// The period: "1m", "24h"…
	Per caddy.Duration `json:"per"`
	// Most calls at once. Default: rate.
	Burst int `json:"burst,omitempty"`
}

// unmarshalRateLimit parses the rate limit subdirectives; handled is false
// for any other.
//
//	rate_limit <agent|user|tool|agent+tool|…> <calls>/<period> [burst <n>]   # repeatable
//	rate_limit_fail_open
func (h *Handler) unmarshalRateLimit(d *caddyfile.Dispenser, name string) (handled bool, err error) {
	switch name {
	case "rate_limit":
		args := d.RemainingArgs()
		if len(args) != 2 && len(args) != 4 {
			return true, d.Err("rate_limit takes a key and a rate, and maybe a burst: rate_limit agent+tool 10/1m [burst 5]")
		}
		key, err := ratelimit.ParseKey(args[0])
		if err != nil {
			return true, d.Err(err.Error())
		}
		n, per, err := ratelimit.ParseRate(args[1], caddy.ParseDuration)
		if err != nil {
			return true, d.Err(err.Error())
		}
		l := RateLimit{Key: key, Rate: n, Per: caddy.Duration(per)}
		if len(args) == 4 {
			b, err := strconv.Atoi(args[3])
			if args[2] != "burst" || err != nil || b < 1 {
				return true, d.Errf("rate_limit: after the rate comes burst <n>, a positive number of calls; got %q %q", args[2], args[3])
			}
			l.Burst = b
		}
		if d.NextBlock(d.Nesting()) {
			return true, d.Err("rate_limit takes no block")
		}
		for _, o := range h.RateLimits {
			if sameLimit(o, l) {
				return true, d.Errf("rate_limit %s %s given twice", args[0], args[1])
			}
		}
		h.RateLimits = append(h.RateLimits, l)
		return true, nil
	case "rate_limit_fail_open":
		if err := onlyOnce(d, name, h.RateLimitFailOpen); err != nil {
			return true, err
		}
		if d.NextArg() {
			return true, d.ArgErr()
		}
		h.RateLimitFailOpen = true
		return true, nil
	}
	return false, nil
}

// sameLimit: a and b count the same thing at the same rate.
func sameLimit(a, b RateLimit) bool {
	la := ratelimit.Limit{Key: a.Key, Rate: a.Rate, Per: time.Duration(a.Per), Burst: a.Burst}
	lb := ratelimit.Limit{Key: b.Key, Rate: b.Rate, Per: time.Duration(b.Per), Burst: b.Burst}
	return la.String() == lb.String()
}
