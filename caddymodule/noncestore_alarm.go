package caddymodule

import (
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// alarmInterval is the least time between two ERROR lines about one
// store: an outage fails every request that needs the store, and one line
// per request would bury the rest of the log.
const alarmInterval = 30 * time.Second

// storeAlarm is one pooled store's outage log limiter; it is shared by
// every configuration using the store, so a reload does not log again.
type storeAlarm struct {
	// last is when the last line was logged, in Unix nanoseconds.
	last atomic.Int64
}

// alarmLog is a module's view of its store's alarm: the logger of the
// configuration that provisioned the module and the store's name.
type alarmLog struct {
	alarm  *storeAlarm
	logger *zap.Logger
	store  string
}

// note logs err, at most once per alarmInterval for the store, when it
// says the store is unavailable (the request then fails closed with 503);
// it returns err unchanged. Metrics count every failure; the log line is
// there so that an operator reading only the log sees the outage too.
func (a alarmLog) note(err error) error {
	if err == nil || a.alarm == nil || a.logger == nil || !errors.Is(err, challenge.ErrStoreUnavailable) {
		return err
	}
	now := time.Now().UnixNano()
	last := a.alarm.last.Load()
	if last != 0 && now-last < int64(alarmInterval) {
		return err
	}
	if !a.alarm.last.CompareAndSwap(last, now) {
		return err // another request is logging this outage
	}
	a.logger.Error("nonce store unavailable: requests that need it are refused with 503 until it answers again (logged at most every 30s)",
		zap.String("store", a.store), zap.Error(err))
	return err
}
