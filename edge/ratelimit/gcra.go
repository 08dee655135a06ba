package ratelimit

import (
	"context"
	"errors"
	"time"
)

// Quota is a limit as GCRA counts it: one call every Interval on average,
// at most Burst at once.
type Quota struct {
	Interval time.Duration
	Burst    int
}

// Result is a store's answer for one key.
type Result struct {
	Allowed bool
	// RetryAfter is how long until the calls asked for would be allowed
	// (0 when allowed).
	RetryAfter time.Duration
	// Remaining is how many more calls would be allowed now.
	Remaining int
	// Fresh: the key held no live count before this take, so an allowed
	// take of calls (n > 0) started a new counter.
	Fresh bool
}

// Store keeps the counters of the limits. Take counts n calls against key
// at once, all or none; a negative n gives back calls taken before (a
// request refused by another limit).
type Store interface {
	Take(ctx context.Context, key string, q Quota, n int) (Result, error)
}

// ErrFull is returned by a Memory store that holds its most keys, none of
// them idle: counting a new key would mean forgetting a live one.
var ErrFull = errors.New("ratelimit: the in-memory store holds its most keys")

// gcra decides n calls at now (all times in one unit) against tat, the
// theoretical arrival time stored for the key (0 when none): it returns the
// time to store (tat itself when refused), whether the calls are allowed,
// how long until they would be, and how many calls remain allowed now.
//
// A stored time in the past counts as now: a key idle long enough has its
// whole burst again, so forgetting it then (Memory's sweep, Redis's
// expiry) changes nothing.
func gcra(tat, now, interval, burst, n int64) (next int64, allowed bool, retry, remaining int64) {
	if tat < now {
		tat = now
	}
	tau := burst * interval
	next = tat + n*interval
	if at := next - tau; at > now {
		return tat, false, at - now, (now + tau - tat) / interval
	}
	return next, true, 0, (now + tau - next) / interval
}
