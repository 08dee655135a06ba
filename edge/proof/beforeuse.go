package proof

import "context"

// beforeUseKey carries the function BeforeUse sets.
type beforeUseKey struct{}

// BeforeUse returns ctx carrying f, which the gate runs after a request
// proof's signatures have verified and just before its nonce is written
// to the store: the host's last word on whether the proof may cost the
// store a record (a rate limit, say). An error from f stops the write;
// the gate then refuses the proof as if the store had failed, and the
// host answers with what f decided instead.
func BeforeUse(ctx context.Context, f func(context.Context) error) context.Context {
	return context.WithValue(ctx, beforeUseKey{}, f)
}

// beforeUse runs the function BeforeUse set in ctx, if any.
func beforeUse(ctx context.Context) error {
	if f, _ := ctx.Value(beforeUseKey{}).(func(context.Context) error); f != nil {
		return f(ctx)
	}
	return nil
}
