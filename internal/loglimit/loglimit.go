// Package loglimit keeps a log line that any client can cause from being
// written once per request: a flood of refused requests would bury the
// rest of the log, and cost a write each.
package loglimit

import (
	"sync/atomic"
	"time"
)

// Every lets one line through per interval. The zero value lets the first
// through; it is safe for concurrent use and must not be copied.
type Every struct {
	// last is when a line was last let through, in Unix nanoseconds.
	last atomic.Int64
}

// Allow reports whether a line may be written now, at most once per
// interval: of concurrent callers in a new interval, one is let through.
func (e *Every) Allow(interval time.Duration) bool {
	now := time.Now().UnixNano()
	prev := e.last.Load()
	if prev != 0 && now-prev < int64(interval) {
		return false
	}
	return e.last.CompareAndSwap(prev, now)
}
