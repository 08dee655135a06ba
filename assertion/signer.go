package assertion

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Header types.
const (
	// Type is the JWS "typ" of an X-Verified-Delegation assertion.
	Type = "mcpi-delegation+jwt"
	// KYAOSProofLifetime is the lifetime of a KYA-OS-Delegation-Proof.
	KYAOSProofLifetime = 60 * time.Second
	// DefaultReuseCacheSize bounds the reuse cache.
	DefaultReuseCacheSize = 4096
)

// Signer signs X-Verified-Delegation assertions and KYA-OS delegation proofs
// with the current key of a KeySet. It is safe for concurrent use.
//
// Reuse (WithReuse, on by default): Sign returns the assertion it already
// signed for the same credential (same vc_hash) and the same audience while
// that assertion has more than half of its lifetime left. The jti then
// repeats within that window, so an upstream must not treat jti as
// single-use while reuse is on; the assertion is a statement about who is
// calling, not a one-time token.
type Signer struct {
	edgeDID   string
	lifetime  time.Duration
	skew      time.Duration
	now       func() time.Time
	reuse     bool
	cacheSize int

	ks    atomic.Pointer[KeySet]
	state atomic.Pointer[signingKey]
	cache *reuseCache
}

// Option configures New.
type Option func(*Signer)

// WithLifetime sets the assertion lifetime. Default 60s; New rejects values
// outside (0, MaxLifetime].
func WithLifetime(d time.Duration) Option { return func(s *Signer) { s.lifetime = d } }

// WithClock injects the clock. Default time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Signer) {
		if now != nil {
			s.now = now
		}
	}
}

// WithClockSkew is the clock skew the verifier of the delegations allowed
// (vc.WithClockSkew). A delegation counts as expired, and an assertion for
// it ends, at vc.AcceptedUntil(d.ExpiresAt, skew), so that the signer
// refuses no delegation the verifier just accepted. Default 0: the
// delegation's own expiry.
func WithClockSkew(d time.Duration) Option { return func(s *Signer) { s.skew = max(d, 0) } }

// WithReuse turns the reuse cache on or off. Default on.
func WithReuse(on bool) Option { return func(s *Signer) { s.reuse = on } }

// WithReuseCacheSize bounds the reuse cache (entries). Default 4096.
func WithReuseCacheSize(n int) Option {
	return func(s *Signer) {
		if n > 0 {
			s.cacheSize = n
		}
	}
}

// New returns a Signer for the edge identified by edgeDID (for example
// "did:web:edge.example.com") signing with ks.
func New(ks *KeySet, edgeDID string, opts ...Option) (*Signer, error) {
	if ks == nil {
		return nil, fmt.Errorf("%w: nil key set", ErrUnsupportedKey)
	}
	if !strings.HasPrefix(edgeDID, "did:") || strings.ContainsAny(edgeDID, "#?") {
		return nil, fmt.Errorf("assertion: edge DID %q is not a DID", edgeDID)
	}
	s := &Signer{
		edgeDID:   edgeDID,
		lifetime:  DefaultLifetime,
		now:       time.Now,
		reuse:     true,
		cacheSize: DefaultReuseCacheSize,
	}
	for _, o := range opts {
		o(s)
	}
	if s.lifetime <= 0 || s.lifetime > MaxLifetime || s.lifetime%time.Second != 0 {
		return nil, fmt.Errorf("%w: %v (want whole seconds in (0s, %v])", ErrLifetime, s.lifetime, MaxLifetime)
	}
	s.cache = newReuseCache(s.cacheSize)
	if err := s.SetKeySet(ks); err != nil {
		return nil, err
	}
	return s, nil
}

// EdgeDID returns the issuer DID of the assertions.
func (s *Signer) EdgeDID() string { return s.edgeDID }

// Lifetime returns the assertion lifetime.
func (s *Signer) Lifetime() time.Duration { return s.lifetime }

// KeySet returns the set the Signer signs with.
func (s *Signer) KeySet() *KeySet { return s.ks.Load() }

// SetKeySet replaces the key set (after loading a rotated set from
// storage). The reuse cache is emptied when the current key changes (cached
// assertions are only ever served for the key that signed them anyway). The
// set's retention must cover the lifetime.
func (s *Signer) SetKeySet(ks *KeySet) error {
	if ks == nil || ks.CurrentAt(s.now()).Signer == nil {
		return fmt.Errorf("%w: empty key set", ErrUnsupportedKey)
	}
	if r := ks.Retention(); r < s.lifetime {
		return fmt.Errorf("%w: lifetime %v exceeds the key set's retention %v", ErrLifetime, s.lifetime, r)
	}
	old := s.ks.Swap(ks)
	if now := s.now(); old == nil || old.CurrentAt(now).Thumbprint != ks.CurrentAt(now).Thumbprint {
		s.cache.clear()
	}
	return nil
}

// signingKey is a key with its protected headers pre-encoded.
type signingKey struct {
	key       Key
	kid       string
	header    string // base64url protected header, typ mcpi-delegation+jwt
	kyaHeader string // base64url protected header, typ JWT
}

type jwsHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

func encodeHeader(alg, kid, typ string) string {
	b, _ := json.Marshal(jwsHeader{Alg: alg, Kid: kid, Typ: typ}) // cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

// current returns the prepared current key, rebuilding it after a rotation
// (a scheduled key starts signing by the Signer's clock).
func (s *Signer) current() *signingKey {
	k := s.ks.Load().CurrentAt(s.now())
	if st := s.state.Load(); st != nil && st.key.Thumbprint == k.Thumbprint {
		return st
	}
	kid := k.KeyID(s.edgeDID)
	st := &signingKey{
		key:       k,
		kid:       kid,
		header:    encodeHeader(k.Alg, kid, Type),
		kyaHeader: encodeHeader(k.Alg, kid, "JWT"),
	}
	s.state.Store(st)
	return st
}

// sign appends ".<signature>" to the signing input header.payload.
func sign(k Key, header string, payload []byte) (string, error) {
	n := len(header) + 1 + base64.RawURLEncoding.EncodedLen(len(payload))
	buf := make([]byte, 0, n+1+base64.RawURLEncoding.EncodedLen(64))
	buf = append(buf, header...)
	buf = append(buf, '.')
	buf = base64.RawURLEncoding.AppendEncode(buf, payload)
	var sig []byte
	switch p := k.Signer.(type) {
	case ed25519.PrivateKey:
		sig = ed25519.Sign(p, buf)
	case *ecdsa.PrivateKey:
		h := sha256.Sum256(buf)
		r, sv, err := ecdsa.Sign(rand.Reader, p, h[:])
		if err != nil {
			return "", fmt.Errorf("assertion: signing: %w", err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		sv.FillBytes(sig[32:])
	default:
		return "", ErrUnsupportedKey
	}
	buf = append(buf, '.')
	buf = base64.RawURLEncoding.AppendEncode(buf, sig)
	return string(buf), nil
}

func newJTI() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Claims is the payload of an X-Verified-Delegation assertion.
type Claims struct {
	Issuer       string `json:"iss"`
	Audience     string `json:"aud"`
	IssuedAt     int64  `json:"iat"`
	ExpiresAt    int64  `json:"exp"`
	ID           string `json:"jti"`
	Subject      string `json:"sub"`
	Actor        Actor  `json:"act"`
	Scope        string `json:"scope"`
	DelegationID string `json:"delegation_id,omitempty"`
	VCHash       string `json:"vc_hash"`
}

// Actor is the RFC 8693 "act" claim: the agent acting for the subject.
type Actor struct {
	Subject string `json:"sub"`
}

// KYAOSClaims is the payload of a KYA-OS-Delegation-Proof.
type KYAOSClaims struct {
	Issuer          string   `json:"iss"`
	Subject         string   `json:"sub"`
	Audience        string   `json:"aud"`
	IssuedAt        int64    `json:"iat"`
	ExpiresAt       int64    `json:"exp"`
	ID              string   `json:"jti"`
	DelegationID    string   `json:"delegation_id,omitempty"`
	DelegationChain []string `json:"delegation_chain"`
	Scope           string   `json:"scope"`
}

// window returns iat and exp for an assertion of lifetime life issued at
// now for d: exp never passes the instant the verifier stops accepting
// the delegation (its expiry plus the clock skew).
func (s *Signer) window(d *vc.Delegation, now time.Time, life time.Duration) (iat, exp int64, err error) {
	iat = now.Unix()
	exp = iat + int64(life/time.Second)
	if until := s.acceptedUntil(d); until != 0 && until < exp {
		exp = until
	}
	if exp <= iat {
		return 0, 0, ErrDelegationExpired
	}
	return iat, exp, nil
}

// acceptedUntil is vc.AcceptedUntil of d in Unix seconds, 0 when d does
// not expire.
func (s *Signer) acceptedUntil(d *vc.Delegation) int64 {
	if d.ExpiresAt.IsZero() {
		return 0
	}
	return vc.AcceptedUntil(d.ExpiresAt, s.skew).Unix()
}

func checkDelegation(d *vc.Delegation, sep string) error {
	switch {
	case d == nil:
		return fmt.Errorf("%w: nil", ErrInvalidDelegation)
	case d.AgentDID == "":
		return fmt.Errorf("%w: no agent DID", ErrInvalidDelegation)
	case d.UserDID == "":
		return fmt.Errorf("%w: no user DID", ErrInvalidDelegation)
	case d.Hash == [sha256.Size]byte{}:
		return fmt.Errorf("%w: no credential hash", ErrInvalidDelegation)
	}
	for _, sc := range d.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n"+sep) {
			return fmt.Errorf("%w: scope not representable", ErrInvalidDelegation)
		}
	}
	return nil
}

// Sign returns the X-Verified-Delegation assertion for d, addressed to
// audience (the upstream's identifier, for example its did:web or origin).
// Its exp is iat plus the lifetime, but never after d.ExpiresAt plus the
// clock skew (WithClockSkew); a delegation expired beyond the skew by the
// Signer's clock gives ErrDelegationExpired.
func (s *Signer) Sign(d *vc.Delegation, audience string) (string, error) {
	if err := checkDelegation(d, ""); err != nil {
		return "", err
	}
	if audience == "" {
		return "", fmt.Errorf("%w: empty audience", ErrInvalidDelegation)
	}
	now := s.now()
	sk := s.current()
	ck := cacheKey{hash: d.Hash, aud: audience}
	if s.reuse {
		if tok, ok := s.cache.get(ck, sk.key.Thumbprint, now, d, s.acceptedUntil(d)); ok {
			return tok, nil
		}
	}
	iat, exp, err := s.window(d, now, s.lifetime)
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(Claims{
		Issuer:       s.edgeDID,
		Audience:     audience,
		IssuedAt:     iat,
		ExpiresAt:    exp,
		ID:           newJTI(),
		Subject:      d.UserDID,
		Actor:        Actor{Subject: d.AgentDID},
		Scope:        strings.Join(d.Scopes, " "),
		DelegationID: d.DelegationID,
		VCHash:       d.HashRef(),
	})
	if err != nil {
		return "", fmt.Errorf("assertion: encoding claims: %w", err)
	}
	tok, err := sign(sk.key, sk.header, payload)
	if err != nil {
		return "", err
	}
	if s.reuse {
		s.cache.put(ck, cacheEntry{token: tok, iat: iat, exp: exp, thumb: sk.key.Thumbprint, says: statedBy(d)})
	}
	return tok, nil
}

// HashReference returns the value X-Verified-Delegation carries in the
// hash-reference mode: "sha256:<hex of the presented credential>".
func HashReference(d *vc.Delegation) string { return d.HashRef() }

// SignKYAOSProof returns a KYA-OS-Delegation-Proof JWT (typ JWT) for d,
// addressed to audienceHost (the upstream's host), valid for 60 s (or until
// the delegation expires, if sooner). chain lists the delegation ids from
// the root to d; when empty it is d's own delegation id.
func (s *Signer) SignKYAOSProof(d *vc.Delegation, audienceHost string, chain []string) (string, error) {
	if err := checkDelegation(d, ","); err != nil {
		return "", err
	}
	if audienceHost == "" {
		return "", fmt.Errorf("%w: empty audience", ErrInvalidDelegation)
	}
	iat, exp, err := s.window(d, s.now(), KYAOSProofLifetime)
	if err != nil {
		return "", err
	}
	if len(chain) == 0 {
		chain = []string{}
		if d.DelegationID != "" {
			chain = []string{d.DelegationID}
		}
	}
	payload, err := json.Marshal(KYAOSClaims{
		Issuer:          s.edgeDID,
		Subject:         d.UserDID,
		Audience:        audienceHost,
		IssuedAt:        iat,
		ExpiresAt:       exp,
		ID:              newJTI(),
		DelegationID:    d.DelegationID,
		DelegationChain: chain,
		Scope:           strings.Join(d.Scopes, ","),
	})
	if err != nil {
		return "", fmt.Errorf("assertion: encoding claims: %w", err)
	}
	sk := s.current()
	return sign(sk.key, sk.kyaHeader, payload)
}

// reuseCache is a bounded map of signed assertions. Eviction is FIFO over
// a ring of slots: entries all have about the same lifetime, so the oldest
// inserted is the first to go stale.
type reuseCache struct {
	mu   sync.Mutex
	m    map[cacheKey]*cacheEntry
	ring []cacheKey
	used []bool
	next int
}

type cacheKey struct {
	hash [sha256.Size]byte
	aud  string
}

type cacheEntry struct {
	token    string
	iat, exp int64
	thumb    string
	says     stated
	slot     int
}

// stated is what an assertion says of its delegation beyond the
// credential's hash. The hash names the presented credential alone, but
// one credential can verify two ways (with the ancestors of a
// KYA-OS-Delegation-Chain, and without them: another user, another expiry),
// so a token is reused only for the verdict it states.
type stated struct {
	user, agent, delegationID string
	scopes                    []string
}

// statedBy copies what an assertion for d states (the scopes' slice too:
// the entry outlives the request).
func statedBy(d *vc.Delegation) stated {
	return stated{user: d.UserDID, agent: d.AgentDID, delegationID: d.DelegationID, scopes: slices.Clone(d.Scopes)}
}

// statesAsFor reports whether e says what an assertion for d would: the same
// user, agent, delegation and scopes, and an expiry d still covers (until
// is when d stops being accepted, 0 for never).
func (e *cacheEntry) statesAsFor(d *vc.Delegation, until int64) bool {
	return e.says.user == d.UserDID && e.says.agent == d.AgentDID &&
		e.says.delegationID == d.DelegationID && slices.Equal(e.says.scopes, d.Scopes) &&
		(until == 0 || e.exp <= until)
}

func newReuseCache(n int) *reuseCache {
	return &reuseCache{m: make(map[cacheKey]*cacheEntry, n), ring: make([]cacheKey, n), used: make([]bool, n)}
}

// get returns the cached token for k if it was signed with the key thumb,
// states what an assertion for d (accepted until until) would, and has
// more than half of its lifetime left at now.
func (c *reuseCache) get(k cacheKey, thumb string, now time.Time, d *vc.Delegation, until int64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || e.thumb != thumb || !e.statesAsFor(d, until) {
		return "", false
	}
	// Fresh while exp-now > (exp-iat)/2, i.e. 2*now < iat+exp (in ns, so
	// that sub-second progress counts).
	if 2*now.UnixNano() >= (e.iat+e.exp)*int64(time.Second) || now.Unix() < e.iat {
		return "", false
	}
	return e.token, true
}

func (c *reuseCache) put(k cacheKey, e cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		e.slot = old.slot
		*old = e
		return
	}
	slot := c.next
	c.next = (c.next + 1) % len(c.ring)
	if c.used[slot] {
		if old, ok := c.m[c.ring[slot]]; ok && old.slot == slot {
			delete(c.m, c.ring[slot])
		}
	}
	e.slot = slot
	c.ring[slot], c.used[slot] = k, true
	c.m[k] = &e
}

func (c *reuseCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func (c *reuseCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	clear(c.used)
	c.next = 0
}
