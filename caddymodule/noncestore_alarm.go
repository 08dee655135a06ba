package caddymodule

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/loglimit"
)

// alarmInterval is the least time between two ERROR lines about one
// store: an outage fails every request that needs the store, and one line
// per request would bury the rest of the log.
const alarmInterval = 30 * time.Second

// storeAlarm is one pooled store's outage log limiter; it is shared by
// every configuration using the store, so a reload does not log again.
type storeAlarm struct {
	// outage limits the lines about an outage; evict those about writes
	// refused for the server's eviction policy.
	outage, evict loglimit.Every
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
// there so that an operator reading only the log sees the outage too. A
// write refused because the server may evict keys has a line of its own,
// saying what to change.
func (a alarmLog) note(err error) error {
	if err == nil || a.alarm == nil || a.logger == nil || !errors.Is(err, challenge.ErrStoreUnavailable) {
		return err
	}
	if errors.Is(err, challenge.ErrEvictionRisk) {
		if a.alarm.evict.Allow(alarmInterval) {
			a.logger.Error("nonce store refuses single-use writes (503) because the Redis server may evict keys, "+
				"which would let a used proof or presentation be used again: set maxmemory-policy noeviction on it "+
				"(and grant the edge's ACL user INFO, +info, so that the edge can read it), or add accept_eviction "+
				"to nonce_store redis to accept the risk (logged at most every 30s)",
				zap.String("store", a.store), zap.Error(err))
		}
		return err
	}
	if !a.alarm.outage.Allow(alarmInterval) {
		return err
	}
	a.logger.Error("nonce store unavailable: requests that need it are refused with 503 until it answers again (logged at most every 30s)",
		zap.String("store", a.store), zap.Error(err))
	return err
}
