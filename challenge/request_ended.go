package challenge

import (
	"context"
	"errors"
	"fmt"
)

// ErrRequestEnded is wrapped, beside ErrStoreUnavailable and the
// context's error, by the refusal of a store operation whose request
// ended (the client left, or the request's own deadline passed) before
// the store answered. The request is still refused, but the store did
// not fail: such a refusal is neither counted among the store's failures
// nor logged as an outage, so that a client hanging up can neither hide
// a real outage (by using up the alarm's line) nor fake one.
var ErrRequestEnded = errors.New("challenge: the request ended before the nonce store answered")

// requestEnded is the refusal of an operation whose ctx ended.
func requestEnded(ctx context.Context) error {
	return fmt.Errorf("%w: %w: %w", ErrStoreUnavailable, ErrRequestEnded, context.Cause(ctx))
}

// EndedByRequest reports whether err refuses an operation because its
// request ended, not because the store failed: ErrRequestEnded, or a
// cancellation that go-redis returns when the caller's context ends
// mid-command (the store's own commands are bounded by timeouts, never
// cancelled).
func EndedByRequest(err error) bool {
	return errors.Is(err, ErrRequestEnded) || errors.Is(err, context.Canceled)
}
