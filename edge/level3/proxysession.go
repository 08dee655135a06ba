package level3

import (
	"context"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
)

// Proxy-mode handshake sessions: handshake.Bindings keeps them;
// handshake.Calls binds the session an upstream's verify answer opens, and
// Session admits a request presenting a bound one after this route's
// checks (checkSessionRoute).

// routeBindings binds with the step's current Bindings (handshake.Calls),
// so that the calls bind into the very bindings the step looks sessions
// up in (UseBindings may replace them).
type routeBindings struct{ s *Step }

func (b routeBindings) Bind(ctx context.Context, us handshake.UpstreamSession, v *challenge.Verified) (time.Time, string, error) {
	return b.s.bindings.Bind(ctx, us, v)
}

// Bindings are the step's bindings of the upstream's sessions (proxy mode;
// nil in terminate mode).
func (s *Step) Bindings() *handshake.Bindings { return s.bindings }

// UseBindings makes the step bind and look up the upstream's sessions in b
// instead: another store, or read with another clock. Call it before the
// step serves requests.
func (s *Step) UseBindings(b *handshake.Bindings) { s.bindings = b }
