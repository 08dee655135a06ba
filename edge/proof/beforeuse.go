package proof

import "context"

// beforeUseKey carries the function BeforeUse sets.
type beforeUseKey struct{}

// BeforeUseFunc is the host's hook before a proof's nonce is written. It
// returns an error to stop the write, or else, optionally, a function the
// gate runs when the store then answers that the nonce was used already:
// the request is a replay of a proof someone holds (the upstream got its
// body, so anyone who saw it may), and what the hook charged for it is
// given back. A replay must not cost the agent anything.
type BeforeUseFunc func(context.Context) (replayed func(context.Context), err error)

// BeforeUse returns ctx carrying f, which the gate runs after a request
// proof's signatures have verified and just before its nonce is written
// to the store: the host's last word on whether the proof may cost the
// store a record (a rate limit, say). An error from f stops the write;
// the gate then refuses the proof as if the store had failed, and the
// host answers with what f decided instead.
func BeforeUse(ctx context.Context, f BeforeUseFunc) context.Context {
	return context.WithValue(ctx, beforeUseKey{}, f)
}

// beforeUse runs the function BeforeUse set in ctx, if any.
func beforeUse(ctx context.Context) (func(context.Context), error) {
	if f, _ := ctx.Value(beforeUseKey{}).(BeforeUseFunc); f != nil {
		return f(ctx)
	}
	return nil, nil
}
