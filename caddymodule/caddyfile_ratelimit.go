package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/mcpi-edge/caddy-mcpi/edge/ratelimit"
)

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
		l := ratelimit.Limit{Key: key, Rate: n, Per: per}
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
		return true, flag(d, &h.RateLimitFailOpen)
	}
	return false, nil
}

// sameLimit: a and b count the same thing at the same rate.
func sameLimit(a, b ratelimit.Limit) bool {
	return a.String() == b.String()
}
