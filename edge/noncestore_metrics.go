package edge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
)

// measuredNonceStore times every operation of the Level 3 nonce store
// (caddy_mcpi_nonce_store_duration_seconds). provisionNonceStore installs
// it as h.nonces, so the handshake service, the presentation replay
// guard and the presentation nonce check are all measured.
type measuredNonceStore struct {
	store challenge.NonceStore
	// name is the store's label: "memory", "redis" (the module name).
	name string
	obs  *observe.Recorder
}

func (m *measuredNonceStore) Put(ctx context.Context, nonce string, rec challenge.Record, ttl time.Duration) error {
	ctx, span := observe.StartNonceStoreSpan(ctx, m.name, "put")
	start := time.Now()
	err := m.store.Put(ctx, nonce, rec, ttl)
	m.obs.NonceStore(m.name, "put", time.Since(start), storeFailure(err))
	observe.EndSpan(span, spanFailure(err))
	return err
}

func (m *measuredNonceStore) Consume(ctx context.Context, nonce string) (challenge.Record, error) {
	ctx, span := observe.StartNonceStoreSpan(ctx, m.name, "consume")
	start := time.Now()
	rec, err := m.store.Consume(ctx, nonce)
	m.obs.NonceStore(m.name, "consume", time.Since(start), storeFailure(err))
	observe.EndSpan(span, spanFailure(err))
	return rec, err
}

// Peek implements challenge.Peeker: unsupported when the measured store
// cannot peek (the handshake then consumes first).
func (m *measuredNonceStore) Peek(ctx context.Context, nonce string) (challenge.Record, error) {
	p, ok := m.store.(challenge.Peeker)
	if !ok {
		return challenge.Record{}, fmt.Errorf("mcpi: nonce store %s cannot peek: %w", m.name, errors.ErrUnsupported)
	}
	ctx, span := observe.StartNonceStoreSpan(ctx, m.name, "peek")
	start := time.Now()
	rec, err := p.Peek(ctx, nonce)
	if !errors.Is(err, errors.ErrUnsupported) {
		m.obs.NonceStore(m.name, "peek", time.Since(start), storeFailure(err))
	}
	observe.EndSpan(span, spanFailure(err))
	return rec, err
}

// UseOnce implements challenge.SingleUse, measured as a "put" (what a
// proof nonce was before markers had an operation of their own):
// unsupported when the measured store has no markers (the proof gate then
// puts a record).
func (m *measuredNonceStore) UseOnce(ctx context.Context, digest [32]byte, ttl time.Duration) error {
	su, ok := m.store.(challenge.SingleUse)
	if !ok {
		return fmt.Errorf("mcpi: nonce store %s keeps no single-use markers: %w", m.name, errors.ErrUnsupported)
	}
	ctx, span := observe.StartNonceStoreSpan(ctx, m.name, "use_once")
	start := time.Now()
	err := su.UseOnce(ctx, digest, ttl)
	m.obs.NonceStore(m.name, "put", time.Since(start), storeFailure(err))
	observe.EndSpan(span, spanFailure(err))
	return err
}

// storeFailure is err when it is a failure of the store itself, nil for a
// normal answer: a nonce that is not there (Consume) or already is (Put).
// By the NonceStore contract every other error wraps ErrStoreUnavailable.
// A refusal because the request ended (the client left) is no failure of
// the store either, nor an answer: it is observe.ErrRequestEnded, recorded
// under a result of its own.
func storeFailure(err error) error {
	if !errors.Is(err, challenge.ErrStoreUnavailable) &&
		(errors.Is(err, challenge.ErrNonceNotFound) || errors.Is(err, challenge.ErrNonceExists)) {
		return nil
	}
	return endedOr(err)
}

// endedOr is err, or observe.ErrRequestEnded when err refuses an
// operation because its request ended.
func endedOr(err error) error {
	if challenge.EndedByRequest(err) {
		return observe.ErrRequestEnded
	}
	return err
}

// spanFailure is the error a nonce store span ends with: an operation its
// caller abandoned did not fail.
func spanFailure(err error) error {
	if f := storeFailure(err); !errors.Is(f, observe.ErrRequestEnded) {
		return f
	}
	return nil
}

// Seen implements challenge.SeenLocally when the measured store does; it
// is no store operation (no round trip), so it is not measured.
func (m *measuredNonceStore) Seen(digest [32]byte) bool {
	sl, ok := m.store.(challenge.SeenLocally)
	return ok && sl.Seen(digest)
}

var (
	_ challenge.SeenLocally = (*measuredNonceStore)(nil)
	_ challenge.NonceStore  = (*measuredNonceStore)(nil)
	_ challenge.Peeker      = (*measuredNonceStore)(nil)
	_ challenge.SingleUse   = (*measuredNonceStore)(nil)
)

// CountChallenge implements challenge.ChallengeCounter for the measured
// store: unsupported when it bounds no proxied challenges.
func (m *measuredNonceStore) CountChallenge(ctx context.Context, window time.Duration, bound int) error {
	c, ok := m.store.(challenge.ChallengeCounter)
	if !ok {
		return errors.ErrUnsupported
	}
	return c.CountChallenge(ctx, window, bound)
}
