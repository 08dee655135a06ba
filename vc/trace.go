package vc

import "context"

// WithTrace has start trace every verification the result cache did not
// serve (a miss, or no cache): the verification runs in the context start
// returns, so that what it does there (DID resolution, chain fetches,
// status lists) can be traced as part of it, and ends by calling the
// returned func with its error. A cache hit is not traced: it does no
// work worth a span. start runs on the request path, concurrently.
func WithTrace(start func(ctx context.Context) (context.Context, func(error))) Option {
	return func(v *Verifier) { v.trace = start }
}
