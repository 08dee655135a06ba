package challenge

import (
	"context"
	"errors"
	"time"
)

// SessionBinder keeps session bindings: small opaque values under keys,
// each for a time to live. In proxy mode the edge binds the upstream's
// handshake session (under a hash of its id) to the delegation it verified,
// so that later requests presenting only that session can be admitted by
// every replica sharing the store.
//
// Bindings live apart from the nonce records of a NonceStore: the memory
// store keeps them in a table of their own, the Redis store under its key
// prefix followed by "sess:". Keys should be hashes of the secret they
// stand for (a session id), never the secret itself: they are visible to
// whoever can list the store's keys.
//
// Implementations must be safe for concurrent use.
type SessionBinder interface {
	// Bind stores value under key for ttl, replacing any binding already
	// there. It fails with an error wrapping ErrStoreUnavailable when the
	// store cannot be used (ErrStoreFull: the memory store holds its
	// maximum of live bindings).
	Bind(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Lookup returns the value bound under key. It fails with
	// ErrBindingNotFound when there is none (never bound, or expired), and
	// with an error wrapping ErrStoreUnavailable when the store cannot be
	// used. Callers must not modify the returned slice.
	Lookup(ctx context.Context, key string) ([]byte, error)
}

// ErrBindingNotFound: SessionBinder.Lookup found no live binding.
var ErrBindingNotFound = errors.New("challenge: session binding not found")

// redisBindingPrefix follows the store's key prefix for bindings.
const redisBindingPrefix = "sess:"
