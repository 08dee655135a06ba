package edge

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Proxy-mode handshake sessions: handshake.Bindings keeps them;
// handshake.Calls binds the session an upstream's verify answer opens, and
// the edge admits a request presenting a bound one after this route's
// checks.

// proxySessionBinder returns the nonce store as a SessionBinder (measured),
// or an error when the configured store module cannot hold bindings.
func (l *level3) proxySessionBinder() (challenge.OwnedBinder, error) {
	var store challenge.NonceStore = l.store
	name := "nonce_store"
	if m, ok := store.(*measuredNonceStore); ok {
		store, name = m.store, m.name
	}
	b, ok := store.(challenge.SessionBinder)
	if !ok {
		return nil, fmt.Errorf("mcpi: nonce store %s cannot keep handshake sessions (`handshake proxy` needs memory or redis)", name)
	}
	return &measuredBinder{binder: b, name: name, obs: l.obs}, nil
}

// routeBindings binds with the route's current Bindings (handshake.Calls),
// so that the calls bind into the very bindings the route looks sessions
// up in (tests swap them for another store or a later clock).
type routeBindings struct{ l *level3 }

func (b routeBindings) Bind(ctx context.Context, s handshake.UpstreamSession, v *challenge.Verified) (time.Time, string, error) {
	return b.l.proxySessions.Bind(ctx, s, v)
}

// boundSession returns the delegation bound to the upstream session r
// presents, checked against this route (trust, audience, required scopes),
// or nil when r presents none that is bound (handshake.Bindings.Lookup).
func (l *level3) boundSession(r *http.Request) (*vc.Delegation, error) {
	d, err := l.proxySessions.Lookup(r)
	if err != nil || d == nil {
		return nil, err
	}
	if err := l.checkSessionRoute(r, d); err != nil {
		return nil, err
	}
	return d, nil
}
