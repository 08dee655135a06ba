// Package handshake is the edge's MCP-I Level 3 handshake: the handshake
// and verify calls, answered (terminate) or checked and forwarded (proxy)
// (Calls); discovery of the upstream's endpoints (Discovery) and forwarding
// to them (Forwarder); the stateless session tokens the edge issues when it
// terminates a handshake and the keys they are signed with (Sessions); and,
// when it proxies one, the bindings of the upstream's session ids to what
// the edge verified (Bindings). Its errors wrap vc's and challenge's
// sentinels; edge maps the ones it answers to responses.
package handshake

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Edge-issued handshake sessions (terminate mode).
//
// A session is a stateless token: "mcpis1.<payload>.<mac>", where payload
// is the base64url JSON of Claims and mac the base64url
// HMAC-SHA256 of "mcpis1.<payload>" under the handler's session key.
// Nothing is stored per session, and a session cannot be revoked before it
// expires: keep session_ttl short (default 15m, never beyond the
// credential's expiry).
//
// The session key is not the key kept in Caddy's storage (one per storage,
// shared by every site and route): each handler derives its own from it
// with HKDF-SHA256, the info naming the handler's acceptance policy
// (edge's acceptancePolicy: trust, audiences, level…). Replicas and routes with
// the same policy derive the same key and accept each other's sessions; a
// route that would not have accepted the credential (another trust list,
// say) has another key and refuses the session as not its own. The claims
// also carry the chain's root issuer, checked against the route's trust on
// every use (edge's checkSessionRoute), so that a session cannot outgrow the trust
// it was issued under even if two policies ever shared a key.

const (
	// SessionPrefix starts every session token (its format's version).
	SessionPrefix = "mcpis1."
	// maxSessionToken bounds what is parsed from a header.
	maxSessionToken = 8 << 10
	// sessionKeyName is the storage key of the key that the handlers'
	// session (HMAC) keys are derived from.
	sessionKeyName = "mcpi/handshake_session_key"
	// SessionKeySize is the size of the stored and the derived keys.
	SessionKeySize = 32
	// sessionKeyInfo starts the HKDF info of a handler's session key; the
	// acceptance policy's fingerprint follows.
	sessionKeyInfo = "mcpi handshake session key v1 "

	// HeaderMcpSessionID is MCP's session header: an edge session there
	// counts only with a valid MAC of ours.
	HeaderMcpSessionID = "Mcp-Session-Id"
	// HeaderSession carries only edge sessions.
	HeaderSession = "X-Mcpi-Handshake-Session"
	// DefaultSessionTTL is session_ttl's default.
	DefaultSessionTTL     = 15 * time.Minute
	sessionStorageTimeout = 10 * time.Second
)

// Claims is what a session token says: the verified delegation,
// reduced to what the later requests need (placeholders, route checks,
// the Level 2 headers).
type Claims struct {
	AgentDID string `json:"agt"`
	UserDID  string `json:"usr,omitempty"`
	Issuer   string `json:"iss,omitempty"`
	// RootIssuer is the issuer of the chain's root: the one the trust
	// policy accepted (the leaf's issuer for a single credential).
	RootIssuer string `json:"root,omitempty"`
	// RootAgentDID is the subject of the chain's root (the agent's own DID
	// for a single credential): what limits per agent count by.
	RootAgentDID string   `json:"ragt,omitempty"`
	Scopes       []string `json:"scp,omitempty"`
	Audience     []string `json:"aud,omitempty"`
	DelegationID string   `json:"did,omitempty"`
	CredentialID string   `json:"cid,omitempty"`
	Format       string   `json:"fmt,omitempty"`
	// Hash is the base64url SHA-256 of the credential that was verified
	// (for the Level 2 X-Verified-Delegation hash reference).
	Hash      string `json:"h,omitempty"`
	IssuedAt  int64  `json:"iat"`
	ExpiresAt int64  `json:"exp"`
}

// NewClaims reduces d, verified for agentDID, to a session's claims,
// valid from now until exp.
func NewClaims(d *vc.Delegation, agentDID string, now, exp time.Time) Claims {
	return Claims{
		AgentDID:     agentDID,
		UserDID:      d.UserDID,
		Issuer:       d.Issuer,
		RootIssuer:   d.RootIssuer,
		RootAgentDID: d.RootAgentDID,
		Scopes:       d.Scopes,
		Audience:     d.Audience,
		DelegationID: d.DelegationID,
		CredentialID: d.ID,
		Format:       string(d.Format),
		Hash:         base64.RawURLEncoding.EncodeToString(d.Hash[:]),
		IssuedAt:     now.Unix(),
		ExpiresAt:    exp.Unix(),
	}
}

// Sessions issues and checks session tokens. It implements
// challenge.SessionIssuer.
type Sessions struct {
	// key is the handler's session key (DeriveKey).
	key []byte
	ttl time.Duration
	// skew is the clock skew the route's verifier tolerates: a session
	// may last as long as its credential is accepted (vc.AcceptedUntil).
	skew time.Duration
	now  func() time.Time
}

// NewSessions issues and checks sessions signed with key (DeriveKey),
// valid for ttl.
func NewSessions(key []byte, ttl time.Duration) *Sessions {
	return &Sessions{key: key, ttl: ttl, now: time.Now}
}

// WithClock returns sessions like s (same key and lifetime) that read the
// time from now: for tests, and hosts with a clock of their own.
func (s *Sessions) WithClock(now func() time.Time) *Sessions {
	return &Sessions{key: s.key, ttl: s.ttl, skew: s.skew, now: now}
}

// WithSkew returns sessions like s that end when a credential stops being
// accepted under skew (its expiry plus skew), as the verifier decides.
func (s *Sessions) WithSkew(skew time.Duration) *Sessions {
	return &Sessions{key: s.key, ttl: s.ttl, skew: skew, now: s.now}
}

// Expired reports whether the session c stands for has ended.
func (s *Sessions) Expired(c *Claims) bool { return !s.now().Before(time.Unix(c.ExpiresAt, 0)) }

// IssueSession implements challenge.SessionIssuer: a token for d, valid for
// the session TTL but never beyond the credential's acceptance
// (vc.AcceptedUntil).
func (s *Sessions) IssueSession(_ context.Context, d *vc.Delegation, agentDID string) (string, time.Time, error) {
	now := s.now()
	exp := now.Add(s.ttl)
	if end := vc.AcceptedUntil(d.ExpiresAt, s.skew); !end.IsZero() && end.Before(exp) {
		exp = end
	}
	// Whole seconds, rounded down, so the token never outlives the
	// credential.
	exp = time.Unix(exp.Unix(), 0)
	if !exp.After(now) {
		return "", time.Time{}, fmt.Errorf("%w: credential expires now", vc.ErrExpired)
	}
	payload, err := json.Marshal(NewClaims(d, agentDID, now, exp))
	if err != nil {
		return "", time.Time{}, err
	}
	signed := SessionPrefix + base64.RawURLEncoding.EncodeToString(payload)
	return signed + "." + base64.RawURLEncoding.EncodeToString(s.mac(signed)), exp, nil
}

func (s *Sessions) mac(signed string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// Session token errors; they wrap vc sentinels so that edge answers
// them like a credential with the same fault.
var (
	ErrSessionMalformed = fmt.Errorf("%w: not an edge handshake session", vc.ErrMalformed)
	ErrSessionSignature = fmt.Errorf("%w: handshake session not issued by this edge", vc.ErrSignature)
	ErrSessionExpired   = fmt.Errorf("%w: handshake session expired", vc.ErrExpired)
)

// Parse checks a token's MAC (constant time) and decodes it; it does not
// check expiry.
func (s *Sessions) Parse(tok string) (*Claims, error) {
	if len(tok) > maxSessionToken || !strings.HasPrefix(tok, SessionPrefix) {
		return nil, ErrSessionMalformed
	}
	i := strings.LastIndexByte(tok, '.')
	if i < len(SessionPrefix) {
		return nil, ErrSessionMalformed
	}
	signed, macText := tok[:i], tok[i+1:]
	mac, err := base64.RawURLEncoding.DecodeString(macText)
	if err != nil {
		return nil, ErrSessionMalformed
	}
	if !hmac.Equal(mac, s.mac(signed)) {
		return nil, ErrSessionSignature
	}
	payload, err := base64.RawURLEncoding.DecodeString(signed[len(SessionPrefix):])
	if err != nil {
		return nil, ErrSessionMalformed
	}
	var c Claims
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&c); err != nil || c.AgentDID == "" || c.ExpiresAt == 0 {
		return nil, ErrSessionMalformed
	}
	return &c, nil
}

// Delegation rebuilds the verified delegation a session stands for.
// ExpiresAt is the session's expiry, which is never later than the
// credential's.
func (c *Claims) Delegation() *vc.Delegation {
	d := &vc.Delegation{
		AgentDID:     c.AgentDID,
		UserDID:      c.UserDID,
		Issuer:       c.Issuer,
		RootIssuer:   c.RootIssuer,
		RootAgentDID: c.RootAgentDID,
		Scopes:       c.Scopes,
		Audience:     c.Audience,
		DelegationID: c.DelegationID,
		ID:           c.CredentialID,
		Format:       vc.Format(c.Format),
		IssuedAt:     time.Unix(c.IssuedAt, 0),
		ExpiresAt:    time.Unix(c.ExpiresAt, 0),
		// The session was issued for a signed challenge: the agent proved
		// it holds its key, as a presentation would.
		Presented: true,
	}
	if h, err := base64.RawURLEncoding.DecodeString(c.Hash); err == nil && len(h) == len(d.Hash) {
		copy(d.Hash[:], h)
	}
	return d
}

// DeriveKey derives a handler's session key from the stored key:
// HKDF-SHA256, no salt, the info naming the acceptance policy.
func DeriveKey(stored []byte, policy string) ([]byte, error) {
	return hkdf.Key(sha256.New, stored, nil, sessionKeyInfo+policy, SessionKeySize)
}

// LoadKey returns the key kept in storage, creating it under the
// storage lock if absent, so that every replica sharing the storage derives
// the same session keys from it.
func LoadKey(ctx context.Context, st assertion.Storage) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, sessionStorageTimeout)
	defer cancel()
	if key, err := decodeSessionKey(st.Load(ctx, sessionKeyName)); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := st.Lock(ctx, sessionKeyName); err != nil {
		return nil, err
	}
	defer func() { _ = st.Unlock(context.WithoutCancel(ctx), sessionKeyName) }()
	// Another replica may have created it while we waited for the lock.
	if key, err := decodeSessionKey(st.Load(ctx, sessionKeyName)); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	key := make([]byte, SessionKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := st.Store(ctx, sessionKeyName, []byte(base64.RawURLEncoding.EncodeToString(key))); err != nil {
		return nil, err
	}
	return key, nil
}

func decodeSessionKey(data []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	key, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) < SessionKeySize {
		return nil, fmt.Errorf("stored session key %s is invalid", sessionKeyName)
	}
	return key, nil
}

// Lookup finds an edge session on r and returns its delegation, or nil
// when r presents none. X-Mcpi-Handshake-Session is only ever the edge's,
// so any fault in it is an error. Mcp-Session-Id is normally the MCP
// server's own session id: it counts as an edge session only when it
// carries a valid MAC of the edge's (an expired one is still an error, so
// the agent learns to handshake again); anything else is left to the MCP
// server. Neither header is modified: both travel on untouched. The
// route's own rules (trust, audience, scopes) are the caller's to apply.
func (s *Sessions) Lookup(r *http.Request) (*vc.Delegation, error) {
	var claims *Claims
	if vals := r.Header.Values(HeaderSession); len(vals) > 0 {
		if len(vals) > 1 {
			return nil, ErrSessionMalformed
		}
		c, err := s.Parse(strings.TrimSpace(vals[0]))
		if err != nil {
			return nil, err
		}
		claims = c
	} else {
		for _, v := range r.Header.Values(HeaderMcpSessionID) {
			if c, err := s.Parse(strings.TrimSpace(v)); err == nil {
				claims = c
				break
			}
		}
		if claims == nil {
			return nil, nil
		}
	}
	if s.Expired(claims) {
		return nil, ErrSessionExpired
	}
	return claims.Delegation(), nil
}
