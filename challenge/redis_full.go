package challenge

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ErrRedisOutOfMemory is wrapped, beside ErrStoreFull, by the error of a
// write that Redis refused because it has reached its maxmemory and may
// not evict (noeviction): the store is up, and full. Reads and deletes
// still work, and writes do again as records expire or memory is added.
var ErrRedisOutOfMemory = errors.New("challenge: redis is out of memory (used_memory reached maxmemory under noeviction)")

// redisWriteError is the error of a write whose reply was err: full for
// Redis's OOM reply, else unavailable.
func redisWriteError(err error) error {
	if redis.HasErrorPrefix(err, "OOM") {
		return fmt.Errorf("%w: %w: %w", ErrStoreFull, ErrRedisOutOfMemory, err)
	}
	return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
}

// isDown reports whether err says the store could not be reached: it is
// unavailable, and not merely full.
func isDown(err error) bool {
	return errors.Is(err, ErrStoreUnavailable) && !errors.Is(err, ErrStoreFull)
}
