package toolpolicy

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/edge/framing"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The rate limits of a request that carries a KYA-OS request proof are
// taken between the proof's signatures and the write of its single-use
// marker, not at the tool policy as for other requests. After the
// signatures: only the agent's own signed requests count against it, so
// nobody else can spend its budget with made-up proofs. Before the write:
// an agent over its limit costs the shared store nothing, so its requests
// cannot fill the store (or the memory store's bound) that every other
// caller's proofs need. Such a request is counted even if the tool policy
// would then deny it: it has cost a signature check and is about to cost
// a record.
//
// A replay (a proof whose nonce is held already) is given back what it
// was counted once the store says so: the upstream receives every signed
// body, and anyone holding one could otherwise spend the agent's budget
// by sending it again. A replay of a marker the store has confirmed in
// this process (challenge.SeenLocally) is refused by the proof gate
// before this hook runs, and counts nothing. Other concurrent replays
// each hold their count for the round trip until the store answers, so a
// burst of them can briefly refuse the agent's genuine requests.

// giveBackTimeout bounds giving a replay's count back.
const giveBackTimeout = time.Second

// rateTakenKey marks a request whose limits were taken at its proof.
type rateTakenKey struct{}

// errLimitedAtProof stops the proof's write when the limits refused it.
var errLimitedAtProof = errors.New("mcpi: rate limited before the request proof's nonce was written")

// LimitAtProof returns r carrying the proof gate's hook (proof.BeforeUse)
// that takes the rate limits of d's request rb, and where the hook leaves
// its refusal. Without limits, or without a delegation to count by, r is
// returned unchanged (with no place: nil) and the limits are taken by the
// tool policy.
func (p *Policy) LimitAtProof(r *http.Request, d *vc.Delegation, rb *framing.Body, carrierName string) (*http.Request, *error) {
	if p.limits == nil || d == nil {
		return r, nil
	}
	refused := new(error)
	taken := new(bool)
	ctx := context.WithValue(r.Context(), rateTakenKey{}, taken)
	ctx = proof.BeforeUse(ctx, func(context.Context) (func(context.Context), error) {
		if *taken {
			return nil, nil
		}
		msgs, batch, err := rb.Messages()
		if err != nil {
			return nil, nil // the tool policy refuses the body, and takes nothing
		}
		*taken = true
		counted, err := p.limitRateTaken(r, d, msgs, batch, observe.Decision{Carrier: carrierName, Delegation: d})
		if err != nil {
			*refused = err
			return nil, errLimitedAtProof
		}
		return func(ctx context.Context) {
			// Not the request's cancellation: a replayer that hangs up
			// at once must not keep the count.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
			defer cancel()
			counted.GiveBack(ctx)
		}, nil
	})
	return r.WithContext(ctx), refused
}

// rateTakenAtProof reports whether r's limits were taken at its proof.
func rateTakenAtProof(r *http.Request) bool {
	t, _ := r.Context().Value(rateTakenKey{}).(*bool)
	return t != nil && *t
}
