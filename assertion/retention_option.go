package assertion

import (
	"context"
	"crypto"
	"fmt"
	"time"
)

// LoadOrCreateWithRetention is LoadOrCreate for a set whose retired keys
// must stay published for at least minRetention: a new set is created with
// that retention, and a stored set with a shorter one has it raised (under
// the storage lock) and is stored back. The retention is never lowered,
// since another replica sharing the storage may need the longer window. It
// applies to keys retired from now on; minRetention is rounded up to whole
// seconds (the stored form) and must be at least one second.
//
// The retention an edge needs is the assertion lifetime plus the time its
// replicas may go on signing with a retired key (their reload interval) plus
// the clock skew verifiers tolerate: DefaultRetention covers the longest
// lifetime and a minute of both.
func LoadOrCreateWithRetention(ctx context.Context, st Storage, key string, minRetention time.Duration, gen func() (crypto.PrivateKey, error)) (*KeySet, error) {
	if minRetention < time.Second {
		return nil, fmt.Errorf("%w: retention %v shorter than one second", ErrLifetime, minRetention)
	}
	if r := minRetention % time.Second; r != 0 {
		minRetention += time.Second - r
	}
	if ks, found, err := load(ctx, st, key); err != nil {
		return nil, err
	} else if found && ks.Retention() >= minRetention {
		return ks, nil
	}
	var ks *KeySet
	err := withLock(ctx, st, key, func() error {
		var (
			found bool
			err   error
		)
		if ks, found, err = load(ctx, st, key); err != nil {
			return err
		}
		if !found {
			priv, err := gen()
			if err != nil {
				return fmt.Errorf("assertion: generating key: %w", err)
			}
			if ks, err = NewKeySet(priv, time.Now(), WithRetention(minRetention)); err != nil {
				return err
			}
			return store(ctx, st, key, ks)
		}
		if ks.Retention() >= minRetention {
			return nil // raised by another replica while we waited
		}
		ks.mu.Lock()
		ks.retention = minRetention
		ks.mu.Unlock()
		return store(ctx, st, key, ks)
	})
	if err != nil {
		return nil, err
	}
	return ks, nil
}
