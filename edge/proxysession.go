package edge

import (
	"context"
	"fmt"
	"net/http"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Proxy-mode handshake sessions: handshake.Bindings keeps them; the edge
// binds the session an upstream's verify answer opens, and admits a
// request presenting a bound one after this route's checks.

// proxySessionBinder returns the nonce store as a SessionBinder (measured),
// or an error when the configured store module cannot hold bindings.
func (h *Handler) proxySessionBinder() (challenge.SessionBinder, error) {
	var store challenge.NonceStore = h.l3.store
	name := "nonce_store"
	if m, ok := store.(*measuredNonceStore); ok {
		store, name = m.store, m.name
	}
	b, ok := store.(challenge.SessionBinder)
	if !ok {
		return nil, fmt.Errorf("mcpi: nonce store %s cannot keep handshake sessions (`handshake proxy` needs memory or redis)", name)
	}
	return &measuredBinder{binder: b, name: name, h: h}, nil
}

// bindUpstreamSession binds the session the upstream opened in resp, its
// answer to a verify the edge verified as v. An answer that opens none
// (an error, verified false, no usable session id) binds nothing and is
// relayed as is. The error is for answers the agent must not get: one too
// large to read, or a session the edge could not record (store
// unavailable: fail closed, 503), since the agent would hold a session the
// edge then refuses.
func (h *Handler) bindUpstreamSession(ctx context.Context, resp *handshake.Captured, v *challenge.Verified) error {
	if resp.Overflow {
		return handshake.ErrResponseTooLarge
	}
	ps := h.l3.proxySessions
	if ps == nil {
		return nil
	}
	s, why := handshake.UpstreamSessionOf(resp.Status, resp.Header, resp.Body, v.AgentDID)
	if why == "" {
		until, reason, err := ps.Bind(ctx, s, v)
		if err != nil {
			return err
		}
		if why = reason; why == "" {
			if c := h.logger.Check(zapcore.DebugLevel, "upstream handshake session bound"); c != nil {
				c.Write(zap.String("agent_did", v.AgentDID), zap.Time("expires_at", until))
			}
			return nil
		}
	}
	if c := h.logger.Check(zapcore.DebugLevel, "upstream verify answer opens no session at the edge"); c != nil {
		c.Write(zap.String("agent_did", v.AgentDID), zap.String("why", why), zap.Int("status", resp.Status))
	}
	return nil
}

// boundSession returns the delegation bound to the upstream session r
// presents, checked against this route (trust, audience, required scopes),
// or nil when r presents none that is bound (handshake.Bindings.Lookup).
func (h *Handler) boundSession(r *http.Request) (*vc.Delegation, error) {
	d, err := h.l3.proxySessions.Lookup(r)
	if err != nil || d == nil {
		return nil, err
	}
	if err := h.checkSessionRoute(r, d); err != nil {
		return nil, err
	}
	return d, nil
}
