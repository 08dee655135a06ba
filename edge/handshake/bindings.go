package handshake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Proxy-mode handshake sessions.
//
// In proxy mode the upstream opens the session: it answers a verify that
// the edge has already checked (signature, single use, credential) with
// {"verified": true, "sessionId": …}. Before relaying that answer, the edge
// binds the session id to the delegation it verified, in the nonce store
// (so replicas sharing a Redis store share the binding), under a SHA-256 of
// the handler's acceptance policy and the id (BindingKey): the id itself is
// never stored nor logged, and a route with another policy (another trust
// list, say) that shares the store finds no binding, as a terminate-mode
// route with another policy has another session key. A later request that
// carries no credential but that id in X-Mcpi-Handshake-Session or
// Mcp-Session-Id is admitted as the bound delegation, exactly like a
// terminate-mode session (the edge's level3.session), after the same route checks
// (edge's checkSessionRoute: the root issuer against the trust list, audience,
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

// Bindings binds upstream session ids to verified delegations.
type Bindings struct {
	binder challenge.SessionBinder
	// policy is the route's acceptance policy.
	policy string
	ttl    time.Duration
	// skew: a binding lasts as long as its credential is accepted
	// (vc.AcceptedUntil).
	skew time.Duration
	now  func() time.Time
}

// NewBindings keeps bindings in binder (the nonce store), scoped to the
// route's acceptance policy, for at most ttl.
func NewBindings(binder challenge.SessionBinder, policy string, ttl time.Duration) *Bindings {
	return &Bindings{binder: binder, policy: policy, ttl: ttl, now: time.Now}
}

// WithClock returns bindings like b that read the time from now.
func (b *Bindings) WithClock(now func() time.Time) *Bindings {
	c := *b
	c.now = now
	return &c
}

// WithSkew returns bindings like b that end when a credential stops being
// accepted under skew (its expiry plus skew), as the verifier decides.
func (b *Bindings) WithSkew(skew time.Duration) *Bindings {
	c := *b
	c.skew = skew
	return &c
}

// Binder is where b keeps its bindings.
func (b *Bindings) Binder() challenge.SessionBinder { return b.binder }

// bindingKeyPrefix starts what bindingKey hashes.
const bindingKeyPrefix = "mcpi proxy session v1\x00"

// BindingKey is the store key of the binding of session id on a handler
// with acceptance policy policy: the SHA-256, in hex, of both (the policy
// is a fixed-length hex fingerprint, so the two cannot run into each
// other).
func BindingKey(policy, id string) string {
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

// UpstreamSession is what the edge reads of the upstream's verify result.
type UpstreamSession struct {
	id        string
	expiresAt time.Time // zero: not given
}

// UpstreamSessionOf reads the session the upstream opened in its answer to
// a verify of agentDID (status, header and body of that answer). why says,
// when there is none to bind, why (a bounded tag for the log; never the
// id).
func UpstreamSessionOf(status int, header http.Header, body []byte, agentDID string) (s UpstreamSession, why string) {
	if status != http.StatusOK {
		return s, "http_status"
	}
	if enc := header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return s, "encoded"
	}
	msg, err := jsonscan.Object(body, rpcResponseMembers...)
	switch {
	case ambiguous(err):
		return s, "ambiguous"
	case err != nil:
		return s, "not_json_rpc"
	case !present(msg["result"]):
		return s, "no_result" // a JSON-RPC error
	}
	res, err := jsonscan.Object(msg["result"], "verified", "sessionId", "agentDid", "expiresAt")
	if ambiguous(err) {
		return s, "ambiguous"
	}
	var verified bool
	if err != nil || !decodeMember(res, "verified", &verified) {
		return s, "bad_result"
	}
	if !verified {
		return s, "not_verified"
	}
	var id string
	if !decodeMember(res, "sessionId", &id) || id == "" {
		return s, "no_session"
	}
	if !validUpstreamSessionID(id) {
		return s, "session_id_unusable"
	}
	if present(res["agentDid"]) {
		var did string
		if !decodeMember(res, "agentDid", &did) || did != agentDID {
			return s, "other_agent"
		}
	}
	if present(res["expiresAt"]) {
		var text string
		if !decodeMember(res, "expiresAt", &text) {
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

// Bind binds the upstream session s to v's delegation until the time it
// returns, or says why it did not (a bounded tag for the log).
func (ps *Bindings) Bind(ctx context.Context, s UpstreamSession, v *challenge.Verified) (until time.Time, why string, err error) {
	now := ps.now()
	exp := now.Add(ps.ttl)
	if !s.expiresAt.IsZero() && s.expiresAt.Before(exp) {
		exp = s.expiresAt
	}
	if end := vc.AcceptedUntil(v.Delegation.ExpiresAt, ps.skew); !end.IsZero() && end.Before(exp) {
		exp = end
	}
	// Whole seconds, rounded down, as the claims keep it.
	exp = time.Unix(exp.Unix(), 0)
	ttl := exp.Sub(now)
	if ttl < minBindingTTL {
		return time.Time{}, "expires_now", nil
	}
	key := BindingKey(ps.policy, s.id)
	// An upstream handing one session id to two agents would otherwise
	// move the session to the second: the first agent's binding stays.
	if taken, err := boundToAnother(ctx, ps.binder, key, v.AgentDID); err != nil || taken {
		return time.Time{}, "session_id_of_another_agent", err
	}
	val, err := json.Marshal(NewClaims(v.Delegation, v.AgentDID, now, exp))
	if err != nil {
		return time.Time{}, "", err
	}
	if err := ps.binder.Bind(ctx, key, val, ttl); err != nil {
		return time.Time{}, "", err
	}
	return exp, "", nil
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
	var prev Claims
	if json.Unmarshal(val, &prev) != nil {
		return false, nil // unreadable: replaced
	}
	return prev.AgentDID != agentDID, nil
}

// SessionID is the upstream session id r presents, "" for none.
// X-Mcpi-Handshake-Session wins over Mcp-Session-Id, as in terminate mode;
// several values of it are an error (which one would the upstream use?),
// several of Mcp-Session-Id are no session. A value that could never have
// been bound is no session either.
func SessionID(r *http.Request) (string, error) {
	vals := r.Header.Values(HeaderSession)
	switch {
	case len(vals) > 1:
		return "", ErrSessionMalformed
	case len(vals) == 0:
		vals = r.Header.Values(HeaderMcpSessionID)
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

// Lookup returns the delegation bound to the upstream session r presents,
// not yet checked against the route (trust, audience, required scopes:
// the caller's), or nil when r presents none that is bound: that is left
// to the upstream, as an MCP server's own Mcp-Session-Id is. A store
// failure is an error wrapping challenge.ErrStoreUnavailable (503: fail
// closed).
func (ps *Bindings) Lookup(r *http.Request) (*vc.Delegation, error) {
	id, err := SessionID(r)
	if err != nil || id == "" {
		return nil, err
	}
	val, err := ps.binder.Lookup(r.Context(), BindingKey(ps.policy, id))
	switch {
	case errors.Is(err, challenge.ErrBindingNotFound):
		return nil, nil
	case err != nil:
		if !errors.Is(err, challenge.ErrStoreUnavailable) {
			err = fmt.Errorf("%w: %w", challenge.ErrStoreUnavailable, err)
		}
		return nil, err
	}
	var c Claims
	if json.Unmarshal(val, &c) != nil || c.AgentDID == "" || c.ExpiresAt == 0 {
		return nil, nil // not a binding the edge made
	}
	if !ps.now().Before(time.Unix(c.ExpiresAt, 0)) {
		return nil, ErrSessionExpired
	}
	return c.Delegation(), nil
}
