package edge

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Edge-issued handshake sessions (terminate mode).
//
// A session is a stateless token: "mcpis1.<payload>.<mac>", where payload
// is the base64url JSON of sessionClaims and mac the base64url
// HMAC-SHA256 of "mcpis1.<payload>" under the handler's session key.
// Nothing is stored per session, and a session cannot be revoked before it
// expires: keep session_ttl short (default 15m, never beyond the
// credential's expiry).
//
// The session key is not the key kept in Caddy's storage (one per storage,
// shared by every site and route): each handler derives its own from it
// with HKDF-SHA256, the info naming the handler's acceptance policy
// (acceptancePolicy: trust, audiences, level…). Replicas and routes with
// the same policy derive the same key and accept each other's sessions; a
// route that would not have accepted the credential (another trust list,
// say) has another key and refuses the session as not its own. The claims
// also carry the chain's root issuer, checked against the route's trust on
// every use (checkSessionRoute), so that a session cannot outgrow the trust
// it was issued under even if two policies ever shared a key.

const (
	sessionPrefix = "mcpis1."
	// maxSessionToken bounds what is parsed from a header.
	maxSessionToken = 8 << 10
	// sessionKeyName is the storage key of the key that the handlers'
	// session (HMAC) keys are derived from.
	sessionKeyName = "mcpi/handshake_session_key"
	sessionKeySize = 32
	// sessionKeyInfo starts the HKDF info of a handler's session key; the
	// acceptance policy's fingerprint follows.
	sessionKeyInfo = "mcpi handshake session key v1 "

	hdrMcpSessionID       = "Mcp-Session-Id"
	hdrHandshakeSession   = "X-Mcpi-Handshake-Session"
	defaultSessionTTL     = 15 * time.Minute
	sessionStorageTimeout = 10 * time.Second
)

// sessionClaims is what a session token says: the verified delegation,
// reduced to what the later requests need (placeholders, route checks,
// the Level 2 headers).
type sessionClaims struct {
	AgentDID string `json:"agt"`
	UserDID  string `json:"usr,omitempty"`
	Issuer   string `json:"iss,omitempty"`
	// RootIssuer is the issuer of the chain's root: the one the trust
	// policy accepted (the leaf's issuer for a single credential).
	RootIssuer   string   `json:"root,omitempty"`
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

// newSessionClaims reduces d, verified for agentDID, to a session's claims,
// valid from now until exp.
func newSessionClaims(d *vc.Delegation, agentDID string, now, exp time.Time) sessionClaims {
	return sessionClaims{
		AgentDID:     agentDID,
		UserDID:      d.UserDID,
		Issuer:       d.Issuer,
		RootIssuer:   d.RootIssuer,
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

// sessions issues and checks session tokens. It implements
// challenge.SessionIssuer.
type sessions struct {
	// key is the handler's session key (deriveSessionKey).
	key []byte
	ttl time.Duration
	now func() time.Time
}

// IssueSession implements challenge.SessionIssuer: a token for d, valid for
// the session TTL but never beyond the credential's expiry.
func (s *sessions) IssueSession(_ context.Context, d *vc.Delegation, agentDID string) (string, time.Time, error) {
	now := s.now()
	exp := now.Add(s.ttl)
	if !d.ExpiresAt.IsZero() && d.ExpiresAt.Before(exp) {
		exp = d.ExpiresAt
	}
	// Whole seconds, rounded down, so the token never outlives the
	// credential.
	exp = time.Unix(exp.Unix(), 0)
	if !exp.After(now) {
		return "", time.Time{}, fmt.Errorf("%w: credential expires now", vc.ErrExpired)
	}
	payload, err := json.Marshal(newSessionClaims(d, agentDID, now, exp))
	if err != nil {
		return "", time.Time{}, err
	}
	signed := sessionPrefix + base64.RawURLEncoding.EncodeToString(payload)
	return signed + "." + base64.RawURLEncoding.EncodeToString(s.mac(signed)), exp, nil
}

func (s *sessions) mac(signed string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// Session token errors; they wrap vc sentinels so that rejectionFor answers
// them like a credential with the same fault.
var (
	errSessionMalformed = fmt.Errorf("%w: not an edge handshake session", vc.ErrMalformed)
	errSessionSignature = fmt.Errorf("%w: handshake session not issued by this edge", vc.ErrSignature)
	errSessionExpired   = fmt.Errorf("%w: handshake session expired", vc.ErrExpired)
)

// parse checks a token's MAC (constant time) and decodes it; it does not
// check expiry.
func (s *sessions) parse(tok string) (*sessionClaims, error) {
	if len(tok) > maxSessionToken || !strings.HasPrefix(tok, sessionPrefix) {
		return nil, errSessionMalformed
	}
	i := strings.LastIndexByte(tok, '.')
	if i < len(sessionPrefix) {
		return nil, errSessionMalformed
	}
	signed, macText := tok[:i], tok[i+1:]
	mac, err := base64.RawURLEncoding.DecodeString(macText)
	if err != nil {
		return nil, errSessionMalformed
	}
	if !hmac.Equal(mac, s.mac(signed)) {
		return nil, errSessionSignature
	}
	payload, err := base64.RawURLEncoding.DecodeString(signed[len(sessionPrefix):])
	if err != nil {
		return nil, errSessionMalformed
	}
	var c sessionClaims
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&c); err != nil || c.AgentDID == "" || c.ExpiresAt == 0 {
		return nil, errSessionMalformed
	}
	return &c, nil
}

// delegation rebuilds the verified delegation a session stands for.
// ExpiresAt is the session's expiry, which is never later than the
// credential's.
func (c *sessionClaims) delegation() *vc.Delegation {
	d := &vc.Delegation{
		AgentDID:     c.AgentDID,
		UserDID:      c.UserDID,
		Issuer:       c.Issuer,
		RootIssuer:   c.RootIssuer,
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

// sessionFrom finds an edge session on r. X-Mcpi-Handshake-Session is only
// ever ours, so any fault in it is an error. Mcp-Session-Id is normally the
// MCP server's own session id: it counts as an edge session only when it
// carries a valid MAC of ours (an expired one of ours is still an error, so
// the agent learns to handshake again); anything else is left to the MCP
// server. Neither header is modified: both travel on untouched.
func (h *Handler) sessionFrom(r *http.Request) (*vc.Delegation, error) {
	s := h.l3.sessions
	if s == nil {
		return nil, nil
	}
	var claims *sessionClaims
	if vals := r.Header.Values(hdrHandshakeSession); len(vals) > 0 {
		if len(vals) > 1 {
			return nil, errSessionMalformed
		}
		c, err := s.parse(strings.TrimSpace(vals[0]))
		if err != nil {
			return nil, err
		}
		claims = c
	} else {
		for _, v := range r.Header.Values(hdrMcpSessionID) {
			if c, err := s.parse(strings.TrimSpace(v)); err == nil {
				claims = c
				break
			}
		}
		if claims == nil {
			return nil, nil
		}
	}
	if !s.now().Before(time.Unix(claims.ExpiresAt, 0)) {
		return nil, errSessionExpired
	}
	d := claims.delegation()
	if err := h.checkSessionRoute(r, d); err != nil {
		return nil, err
	}
	return d, nil
}

// checkSessionRoute applies this route's rules to a session, as Verify
// applies them to a credential: the trust list (to the chain's root
// issuer), the audience (configured, or derived from the Host) and the
// required scopes. The session was checked against the route that issued
// it; this route may be stricter. (A route with another trust list or
// audiences derives another session key and does not get this far; the
// trust and audience checks here are the second line.)
func (h *Handler) checkSessionRoute(r *http.Request, d *vc.Delegation) error {
	if !h.trustsRoot(d.RootIssuer) {
		return fmt.Errorf("%w: session's issuer not trusted on this route", vc.ErrUntrustedIssuer)
	}
	if len(d.Audience) == 0 {
		if h.RequireAudience {
			return fmt.Errorf("%w: credential names no audience", vc.ErrAudience)
		}
	} else {
		auds := h.Audiences
		if len(auds) == 0 {
			auds = requestAudiences(h.serviceHost(r))
		}
		ok := false
		for _, a := range d.Audience {
			if slices.Contains(auds, a) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("%w: session is for another audience", vc.ErrAudience)
		}
	}
	if !d.HasScopes(h.RequiredScopes...) {
		return fmt.Errorf("%w: session lacks a required scope", vc.ErrMissingScope)
	}
	return nil
}

// trustsRoot reports whether this route's trust list accepts iss as the
// root issuer of a chain (an empty iss only under `trust any`).
func (h *Handler) trustsRoot(iss string) bool {
	for _, t := range h.TrustedIssuers {
		if t == AnyIssuer || (iss != "" && t == iss) {
			return true
		}
	}
	return false
}

// acceptancePolicy fingerprints what decides, on this handler, whether a
// credential is accepted and that a session does not re-check in full:
// the level, the trust list, the configured audiences (none: derived from
// each request's Host) and require_audience, require_presentation, the
// chain depth and the Linked Data proof settings. Lists are sorted and
// deduplicated, so that the order of a config does not matter. It names
// the handler's session key (deriveSessionKey) and scopes its proxy-mode
// session bindings (bindingKey). required_scopes is left out: it is
// checked on every use (checkSessionRoute), and routes that differ only
// in it keep sharing sessions. Call it after Provision set the defaults.
func (h *Handler) acceptancePolicy() string {
	set := func(in []string) []string {
		if len(in) == 0 {
			return nil // absent and empty are one
		}
		out := slices.Clone(in)
		slices.Sort(out)
		return slices.Compact(out)
	}
	var chainFetchAllow []string
	if h.ChainFetch != nil {
		// Fetching on with no prefix is refused by Validate; "on" is
		// marked so that it never equals off.
		chainFetchAllow = append([]string{"on"}, set(h.ChainFetch.Allow)...)
	}
	var contexts []string
	for u := range h.JSONLDContexts {
		contexts = append(contexts, u)
	}
	p := struct {
		Level               int      `json:"level"`
		Trust               []string `json:"trust"`
		Audiences           []string `json:"aud"`
		RequireAudience     bool     `json:"require_aud"`
		RequirePresentation bool     `json:"require_vp"`
		ChainDepth          int      `json:"chain_depth"`
		JSONLD              bool     `json:"jsonld"`
		JSONLDContexts      []string `json:"jsonld_contexts"`
		// What else decides whether a credential is accepted: a route
		// more lenient in any of these must not open sessions that a
		// stricter one takes.
		ClockSkew          int64    `json:"clock_skew"`
		StatusStaleIfError int64    `json:"status_stale"`
		AllowPrivateDIDWeb bool     `json:"private_did_web"`
		ChainFetch         []string `json:"chain_fetch"`
	}{
		Level:               h.Level,
		Trust:               set(h.TrustedIssuers),
		Audiences:           set(h.Audiences),
		RequireAudience:     h.RequireAudience,
		RequirePresentation: h.RequirePresentation,
		ChainDepth:          vc.MaxChainDepth,
		JSONLD:              !h.DisableJSONLD,
		JSONLDContexts:      set(contexts),
		ClockSkew:           int64(h.ClockSkew),
		StatusStaleIfError:  int64(h.StatusStaleIfError),
		AllowPrivateDIDWeb:  h.AllowPrivateDIDWeb,
		ChainFetch:          chainFetchAllow,
	}
	b, _ := json.Marshal(p) // strings, ints and bools only
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// deriveSessionKey derives a handler's session key from the stored key:
// HKDF-SHA256, no salt, the info naming the acceptance policy.
func deriveSessionKey(stored []byte, policy string) ([]byte, error) {
	return hkdf.Key(sha256.New, stored, nil, sessionKeyInfo+policy, sessionKeySize)
}

// loadSessionKey returns the key kept in storage, creating it under the
// storage lock if absent, so that every replica sharing the storage derives
// the same session keys from it.
func loadSessionKey(ctx context.Context, st assertion.Storage) ([]byte, error) {
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
	key := make([]byte, sessionKeySize)
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
	if err != nil || len(key) < sessionKeySize {
		return nil, fmt.Errorf("stored session key %s is invalid", sessionKeyName)
	}
	return key, nil
}
