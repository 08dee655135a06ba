package challenge

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/internal/loglimit"
)

// alarmInterval is the least time between two ERROR lines about one
// store: an outage fails every request that needs the store, and one line
// per request would bury the rest of the log.
const alarmInterval = 30 * time.Second

// Alarm limits the log lines about one store's failures. Share one per
// store among every configuration using it (Watch), so that a reload does
// not log again. The zero value is ready.
type Alarm struct {
	// outage limits the lines about an outage; evict those about writes
	// refused for the server's eviction policy; full those about a Redis
	// out of memory.
	outage, evict, full loglimit.Every
}

// note logs err to logger, at most once per alarmInterval for the store,
// when it says the store is unavailable (the request then fails closed
// with 503); it returns err unchanged. Metrics count every failure; the
// log line is there so that an operator reading only the log sees the
// outage too. A write refused because the server may evict keys, or
// because Redis is out of memory (full, not down), has a line of its own,
// saying what to change. A refusal because the request ended (the
// client left) is no outage, and is not logged.
func (a *Alarm) note(logger *zap.Logger, store string, err error) error {
	if err == nil || a == nil || logger == nil || !errors.Is(err, ErrStoreUnavailable) || EndedByRequest(err) {
		return err
	}
	switch {
	case errors.Is(err, ErrEvictionRisk):
		return a.say(&a.evict, logger, store, err, "nonce store refuses single-use writes (503) because the Redis server may evict keys, "+
			"which would let a used proof or presentation be used again: set maxmemory-policy noeviction on it "+
			"(and grant the edge's ACL user INFO, +info, so that the edge can read it), or add accept_eviction "+
			"to nonce_store redis to accept the risk (logged at most every 30s)")
	case errors.Is(err, ErrRedisOutOfMemory):
		return a.say(&a.full, logger, store, err, "nonce store full: Redis is out of memory (used_memory reached maxmemory under noeviction), "+
			"so single-use writes are refused with 503 nonce_store_full until records expire; Redis itself is up: "+
			"raise maxmemory on the Redis server (CONFIG SET maxmemory, or maxmemory in redis.conf) and give it the memory "+
			"(logged at most every 30s)")
	}
	return a.say(&a.outage, logger, store, err, "nonce store unavailable: requests that need it are refused with 503 until it answers again (logged at most every 30s)")
}

// say logs msg at ERROR, with the store and err, unless lim logged within
// alarmInterval; it returns err.
func (a *Alarm) say(lim *loglimit.Every, logger *zap.Logger, store string, err error, msg string) error {
	if lim.Allow(alarmInterval) {
		logger.Error(msg, zap.String("store", store), zap.Error(err))
	}
	return err
}
