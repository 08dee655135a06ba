package assertion

// The key set in shared storage: loaded, created and rotated under a
// storage lock, so that replicas sharing the storage sign with one set.

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Storage is the subset of certmagic.Storage (Caddy's storage) the key set
// needs. Load must return an error wrapping fs.ErrNotExist for a missing key
// (or Exists must report false); Lock must block until the named lock is
// held across every process sharing the storage.
type Storage interface {
	Load(ctx context.Context, key string) ([]byte, error)
	Store(ctx context.Context, key string, value []byte) error
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
	Exists(ctx context.Context, key string) bool
}

// lockName is the storage lock guarding key, reduced to characters every
// storage accepts in a lock name (certmagic's file storage makes it a file).
func lockName(key string) string {
	safe := []byte(key)
	for i, c := range safe {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			safe[i] = '_'
		}
	}
	return "mcpi_assertion_keyset_" + string(safe)
}

// load reads the set stored under key. found is false when nothing is
// stored there.
func load(ctx context.Context, st Storage, key string) (ks *KeySet, found bool, err error) {
	data, err := st.Load(ctx, key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || !st.Exists(ctx, key) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("%w: loading %q: %w", ErrStorage, key, err)
	}
	ks, err = ParseKeySet(data)
	if err != nil {
		return nil, true, err
	}
	return ks, true, nil
}

func store(ctx context.Context, st Storage, key string, ks *KeySet) error {
	data, err := ks.MarshalJSON()
	if err != nil {
		return err
	}
	if err := st.Store(ctx, key, data); err != nil {
		return fmt.Errorf("%w: storing %q: %w", ErrStorage, key, err)
	}
	return nil
}

// withLock runs fn while holding key's storage lock.
func withLock(ctx context.Context, st Storage, key string, fn func() error) (err error) {
	name := lockName(key)
	if err := st.Lock(ctx, name); err != nil {
		return fmt.Errorf("%w: locking %q: %w", ErrStorage, name, err)
	}
	defer func() {
		if uerr := st.Unlock(context.WithoutCancel(ctx), name); uerr != nil && err == nil {
			err = fmt.Errorf("%w: unlocking %q: %w", ErrStorage, name, uerr)
		}
	}()
	return fn()
}

// LoadOrCreate returns the set stored under key, or, when there is none,
// creates one with a key from gen and stores it. Creation happens under the
// storage lock and re-checks the storage, so replicas sharing a storage all
// end with the same key. A stored set that cannot be decoded is an error,
// never silently replaced.
func LoadOrCreate(ctx context.Context, st Storage, key string, gen func() (crypto.PrivateKey, error)) (*KeySet, error) {
	if ks, found, err := load(ctx, st, key); err != nil || found {
		return ks, err
	}
	var ks *KeySet
	err := withLock(ctx, st, key, func() error {
		var (
			found bool
			err   error
		)
		if ks, found, err = load(ctx, st, key); err != nil || found {
			return err
		}
		priv, err := gen()
		if err != nil {
			return fmt.Errorf("assertion: generating key: %w", err)
		}
		if ks, err = NewKeySet(priv, time.Now()); err != nil {
			return err
		}
		return store(ctx, st, key, ks)
	})
	if err != nil {
		return nil, err
	}
	return ks, nil
}

// RotateStored rotates the set stored under key to a new key from gen, at
// now, under the storage lock, and stores it (creating the set if none is
// stored). Other replicas pick the new key up when they next load the set;
// they must do so well within the retention window (DefaultRetention minus
// the assertion lifetime) so that nothing they sign with the retired key
// outlives its publication. ScheduleStored publishes the new key before it
// signs.
func RotateStored(ctx context.Context, st Storage, key string, now time.Time, gen func() (crypto.PrivateKey, error)) (*KeySet, error) {
	return ScheduleStored(ctx, st, key, now, 0, gen)
}

// ScheduleStored is RotateStored with the new key published at once but
// signing only from now+delay (Schedule), so that verifiers can learn it
// first. A delay of zero or less rotates at once.
func ScheduleStored(ctx context.Context, st Storage, key string, now time.Time, delay time.Duration, gen func() (crypto.PrivateKey, error)) (*KeySet, error) {
	var ks *KeySet
	err := withLock(ctx, st, key, func() error {
		var (
			found bool
			err   error
		)
		if ks, found, err = load(ctx, st, key); err != nil {
			return err
		}
		priv, err := gen()
		if err != nil {
			return fmt.Errorf("assertion: generating key: %w", err)
		}
		if !found {
			if ks, err = NewKeySet(priv, now); err != nil {
				return err
			}
		} else if err := ks.Schedule(now, delay, priv); err != nil {
			return err
		}
		return store(ctx, st, key, ks)
	})
	if err != nil {
		return nil, err
	}
	return ks, nil
}
