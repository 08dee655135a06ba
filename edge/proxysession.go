package edge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/handshake"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Proxy-mode handshake sessions.
//
// In proxy mode the upstream opens the session: it answers a verify that
// the edge has already checked (signature, single use, credential) with
// {"verified": true, "sessionId": …}. Before relaying that answer, the edge
// binds the session id to the delegation it verified, in the nonce store
// (so replicas sharing a Redis store share the binding), under a SHA-256 of
// the handler's acceptance policy and the id (bindingKey): the id itself is
// never stored nor logged, and a route with another policy (another trust
// list, say) that shares the store finds no binding, as a terminate-mode
// route with another policy has another session key. A later request that
// carries no credential but that id in X-Mcpi-Handshake-Session or
// Mcp-Session-Id is admitted as the bound delegation, exactly like a
// terminate-mode session (sessionDelegation), after the same route checks
// (checkSessionRoute: the root issuer against the trust list, audience,
// required scopes). The edge never rewrites either header: the upstream
// gets its own id back.
//
// A binding lasts min(session_ttl, the upstream's expiresAt, the
// credential's expiry). The edge does not learn when the upstream ends a
// session (a DELETE with Mcp-Session-Id is passed through like any
// request), so the binding simply runs out.

const (
	// An upstream session id is bound only when it is 16 to 1024 visible
	// ASCII characters (MCP's rule for Mcp-Session-Id, with bounds): once
	// bound it admits whoever presents it, so an id short enough to guess
	// is refused.
	minUpstreamSessionID = 16
	maxUpstreamSessionID = 1024
	// minBindingTTL: a binding that would last less is not made.
	minBindingTTL = time.Second
)

// proxySessions binds upstream session ids to verified delegations.
type proxySessions struct {
	binder challenge.SessionBinder
	// policy is the handler's acceptancePolicy.
	policy string
	ttl    time.Duration
	now    func() time.Time
}

// bindingKeyPrefix starts what bindingKey hashes.
const bindingKeyPrefix = "mcpi proxy session v1\x00"

// bindingKey is the store key of the binding of session id on a handler
// with acceptance policy policy: the SHA-256, in hex, of both (the policy
// is a fixed-length hex fingerprint, so the two cannot run into each
// other).
func bindingKey(policy, id string) string {
	h := sha256.New()
	h.Write([]byte(bindingKeyPrefix))
	h.Write([]byte(policy))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return hex.EncodeToString(h.Sum(nil))
}

// validUpstreamSessionID reports whether id can be bound and looked up.
func validUpstreamSessionID(id string) bool {
	if len(id) < minUpstreamSessionID || len(id) > maxUpstreamSessionID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

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

// upstreamSession is what the edge reads of the upstream's verify result.
type upstreamSession struct {
	id        string
	expiresAt time.Time // zero: not given
}

// upstreamSessionOf reads the session the upstream opened in its answer to
// a verify of agentDID. why says, when there is none to bind, why (a
// bounded tag for the log; never the id).
func upstreamSessionOf(resp *capturedResponse, agentDID string) (s upstreamSession, why string) {
	if resp.status != http.StatusOK {
		return s, "http_status"
	}
	if enc := resp.header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return s, "encoded"
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(resp.body, &msg); err != nil {
		return s, "not_json_rpc"
	}
	if len(msg.Result) == 0 || bytes.Equal(msg.Result, []byte("null")) {
		return s, "no_result" // a JSON-RPC error
	}
	var res struct {
		Verified  bool            `json:"verified"`
		SessionID json.RawMessage `json:"sessionId"`
		AgentDID  json.RawMessage `json:"agentDid"`
		ExpiresAt json.RawMessage `json:"expiresAt"`
	}
	if err := json.Unmarshal(msg.Result, &res); err != nil {
		return s, "bad_result"
	}
	if !res.Verified {
		return s, "not_verified"
	}
	var id string
	if len(res.SessionID) == 0 || json.Unmarshal(res.SessionID, &id) != nil || id == "" {
		return s, "no_session"
	}
	if !validUpstreamSessionID(id) {
		return s, "session_id_unusable"
	}
	if isPresent(res.AgentDID) {
		var did string
		if json.Unmarshal(res.AgentDID, &did) != nil || did != agentDID {
			return s, "other_agent"
		}
	}
	if isPresent(res.ExpiresAt) {
		var text string
		if json.Unmarshal(res.ExpiresAt, &text) != nil {
			return s, "bad_expiry"
		}
		t, err := time.Parse(time.RFC3339, text)
		if err != nil {
			return s, "bad_expiry"
		}
		s.expiresAt = t
	}
	s.id = id
	return s, ""
}

// isPresent: a member that is there and not null.
func isPresent(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// bindUpstreamSession binds the session the upstream opened in resp, its
// answer to a verify the edge verified as v. An answer that opens none
// (an error, verified false, no usable session id) binds nothing and is
// relayed as is. The error is for answers the agent must not get: one too
// large to read, or a session the edge could not record (store
// unavailable: fail closed, 503), since the agent would hold a session the
// edge then refuses.
func (h *Handler) bindUpstreamSession(ctx context.Context, resp *capturedResponse, v *challenge.Verified) error {
	if resp.overflow {
		return errResponseTooLarge
	}
	ps := h.l3.proxySessions
	if ps == nil {
		return nil
	}
	s, why := upstreamSessionOf(resp, v.AgentDID)
	if why == "" {
		var err error
		if why, err = h.bindSession(ctx, ps, s, v); err != nil || why == "" {
			return err
		}
	}
	if c := h.logger.Check(zapcore.DebugLevel, "upstream verify answer opens no session at the edge"); c != nil {
		c.Write(zap.String("agent_did", v.AgentDID), zap.String("why", why), zap.Int("status", resp.status))
	}
	return nil
}

// bindSession binds the upstream session s to v's delegation, or says why
// it did not.
func (h *Handler) bindSession(ctx context.Context, ps *proxySessions, s upstreamSession, v *challenge.Verified) (why string, err error) {
	now := ps.now()
	exp := now.Add(ps.ttl)
	if !s.expiresAt.IsZero() && s.expiresAt.Before(exp) {
		exp = s.expiresAt
	}
	if d := v.Delegation; !d.ExpiresAt.IsZero() && d.ExpiresAt.Before(exp) {
		exp = d.ExpiresAt
	}
	// Whole seconds, rounded down, as the claims keep it.
	exp = time.Unix(exp.Unix(), 0)
	ttl := exp.Sub(now)
	if ttl < minBindingTTL {
		return "expires_now", nil
	}
	key := bindingKey(ps.policy, s.id)
	// An upstream handing one session id to two agents would otherwise
	// move the session to the second: the first agent's binding stays.
	if taken, err := boundToAnother(ctx, ps.binder, key, v.AgentDID); err != nil || taken {
		return "session_id_of_another_agent", err
	}
	val, err := json.Marshal(handshake.NewClaims(v.Delegation, v.AgentDID, now, exp))
	if err != nil {
		return "", err
	}
	if err := ps.binder.Bind(ctx, key, val, ttl); err != nil {
		return "", err
	}
	if c := h.logger.Check(zapcore.DebugLevel, "upstream handshake session bound"); c != nil {
		c.Write(zap.String("agent_did", v.AgentDID), zap.Time("expires_at", exp))
	}
	return "", nil
}

// boundToAnother reports whether key holds a live binding for an agent
// other than agentDID.
func boundToAnother(ctx context.Context, b challenge.SessionBinder, key, agentDID string) (bool, error) {
	val, err := b.Lookup(ctx, key)
	if errors.Is(err, challenge.ErrBindingNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var prev handshake.Claims
	if json.Unmarshal(val, &prev) != nil {
		return false, nil // unreadable: replaced
	}
	return prev.AgentDID != agentDID, nil
}

// proxySessionID is the upstream session id r presents, "" for none.
// X-Mcpi-Handshake-Session wins over Mcp-Session-Id, as in terminate mode;
// several values of it are an error (which one would the upstream use?),
// several of Mcp-Session-Id are no session. A value that could never have
// been bound is no session either.
func proxySessionID(r *http.Request) (string, error) {
	vals := r.Header.Values(handshake.HeaderSession)
	switch {
	case len(vals) > 1:
		return "", handshake.ErrSessionMalformed
	case len(vals) == 0:
		vals = r.Header.Values(handshake.HeaderMcpSessionID)
		if len(vals) != 1 {
			return "", nil
		}
	}
	// Exactly as sent: net/http already trimmed spaces and tabs, and
	// trimming Unicode spaces too would admit an id the upstream never
	// issued under the identity of the one that was bound.
	id := vals[0]
	if !validUpstreamSessionID(id) {
		return "", nil
	}
	return id, nil
}

// boundSession returns the delegation bound to the upstream session r
// presents, checked against this route (trust, audience, required scopes),
// or nil
// when r presents none that is bound: that is left to the upstream, as an
// MCP server's own Mcp-Session-Id is. A store failure is an error wrapping
// challenge.ErrStoreUnavailable (503: fail closed).
func (h *Handler) boundSession(r *http.Request) (*vc.Delegation, error) {
	ps := h.l3.proxySessions
	id, err := proxySessionID(r)
	if err != nil || id == "" {
		return nil, err
	}
	val, err := ps.binder.Lookup(r.Context(), bindingKey(ps.policy, id))
	switch {
	case errors.Is(err, challenge.ErrBindingNotFound):
		return nil, nil
	case err != nil:
		if !errors.Is(err, challenge.ErrStoreUnavailable) {
			err = fmt.Errorf("%w: %w", challenge.ErrStoreUnavailable, err)
		}
		return nil, err
	}
	var c handshake.Claims
	if json.Unmarshal(val, &c) != nil || c.AgentDID == "" || c.ExpiresAt == 0 {
		return nil, nil // not a binding the edge made
	}
	if !ps.now().Before(time.Unix(c.ExpiresAt, 0)) {
		return nil, handshake.ErrSessionExpired
	}
	d := c.Delegation()
	if err := h.checkSessionRoute(r, d); err != nil {
		return nil, err
	}
	return d, nil
}
