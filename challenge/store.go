package challenge

import (
	"context"
	"time"
)

// Record is what the edge remembers about an issued challenge, stored under
// its nonce. It is JSON-serialisable (the Redis store keeps it as JSON).
type Record struct {
	// Challenge is the issued challenge (compared in constant time).
	Challenge string `json:"challenge"`
	// AgentDID is the DID the challenge was issued to; empty if unbound.
	AgentDID string `json:"agentDid,omitempty"`
	// IssuedAt and ExpiresAt bound the challenge's validity. The store may
	// keep the record longer than ExpiresAt (see Service) so a late answer
	// is told "expired" rather than "unknown".
	IssuedAt  time.Time `json:"issuedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// NonceStore keeps issued challenges until they are consumed or expire.
// Implementations must be safe for concurrent use, and Consume must be
// atomic across every process sharing the store: of any number of
// concurrent Consume calls for one nonce, at most one succeeds.
type NonceStore interface {
	// Put stores rec under nonce for ttl if no record is stored under it
	// (set-if-absent). It fails with ErrNonceExists when one is, and with an
	// error wrapping ErrStoreUnavailable when the store cannot be used.
	Put(ctx context.Context, nonce string, rec Record, ttl time.Duration) error
	// Consume atomically gets and deletes the record under nonce. It fails
	// with ErrNonceNotFound when there is none (never stored, expired or
	// already consumed), and with an error wrapping ErrStoreUnavailable when
	// the store cannot be used.
	Consume(ctx context.Context, nonce string) (Record, error)
}

// Peeker is implemented by a NonceStore that can read a record without
// consuming it. With one, Service.Verify checks an answer against the
// stored challenge before anything is consumed, so that only the agent the
// challenge was issued to, answering that very challenge, spends it; a
// store without it is consumed first, as before.
//
// A store that wraps another (to measure it, say) may implement Peek and
// fail with an error wrapping errors.ErrUnsupported when what it wraps has
// no Peek: Verify then falls back to consuming first.
type Peeker interface {
	// Peek returns the record under nonce, leaving it in place. It fails
	// with ErrNonceNotFound when there is none (never stored, expired or
	// already consumed), and with an error wrapping ErrStoreUnavailable
	// when the store cannot be used.
	Peek(ctx context.Context, nonce string) (Record, error)
}
