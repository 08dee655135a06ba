// Package challenge implements the MCP-I Level 3 JSON-RPC challenge-response
// (docs/protocol/mcpi.md#level-3-the-handshake): the handshake and verify messages, the single-use
// challenge store (in memory, or Redis shared by replicas), the checks on a
// signed challenge and the agent-side signer.
//
// It is a plain Go library: it knows JSON-RPC, DIDs (through a
// didresolver.Resolver) and credentials (through a CredentialVerifier), and
// nothing about Caddy or HTTP.
package challenge

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Service defaults.
const (
	DefaultChallengeTTL = 300 * time.Second
	DefaultSkew         = 120 * time.Second
)

const (
	challengeBytes = 32 // 256 bits
	nonceBytes     = 24 // 192 bits
	// maxAuthKeys bounds the signature checks one verify can cost.
	maxAuthKeys = 8
)

// CredentialVerifier verifies a delegation credential. *vc.Verifier
// satisfies it.
type CredentialVerifier interface {
	Verify(ctx context.Context, raw []byte, opts ...vc.CheckOption) (*vc.Delegation, error)
}

// SessionIssuer opens a session for a verified agent (terminate mode).
type SessionIssuer interface {
	IssueSession(ctx context.Context, d *vc.Delegation, agentDID string) (id string, expiresAt time.Time, err error)
}

// Service issues challenges and verifies the answers. It is safe for
// concurrent use.
type Service struct {
	store    NonceStore
	now      func() time.Time
	ttl      time.Duration
	skew     time.Duration
	resolver didresolver.Resolver
	creds    CredentialVerifier
	sessions SessionIssuer
	methods  []string
	checks   []vc.CheckOption
	// key makes challenges stateless (WithChallengeKey; stateless.go).
	key []byte
	// proxyBound bounds the proxied challenges a ChallengeCounter store
	// records per challenge lifetime (redis_proxycount.go).
	proxyBound int
}

// WithProxyChallengeBound sets how many proxied challenges (Register) a
// store that counts them records per challenge lifetime; 0 is
// DefaultProxyChallengeBound, negative no bound.
func WithProxyChallengeBound(n int) Option { return func(v *Service) { v.proxyBound = n } }

// Option configures New.
type Option func(*Service)

// WithStore sets the nonce store. Required.
func WithStore(s NonceStore) Option { return func(v *Service) { v.store = s } }

// WithClock injects the clock. Default time.Now.
func WithClock(now func() time.Time) Option {
	return func(v *Service) {
		if now != nil {
			v.now = now
		}
	}
}

// WithChallengeTTL sets how long an issued challenge can be answered.
// Default 300s.
func WithChallengeTTL(d time.Duration) Option { return func(v *Service) { v.ttl = d } }

// WithSkew sets the tolerated difference between the signed timestamp and
// the edge's clock, both ways. Default 120s.
func WithSkew(d time.Duration) Option { return func(v *Service) { v.skew = d } }

// WithResolver sets the resolver for agent DIDs. Required.
func WithResolver(r didresolver.Resolver) Option { return func(v *Service) { v.resolver = r } }

// WithCredentialVerifier sets the delegation verifier. Required.
func WithCredentialVerifier(c CredentialVerifier) Option {
	return func(v *Service) { v.creds = c }
}

// WithCredentialChecks adds checks (audience, scopes) to every credential
// verification, before the per-call ones given to Verify.
func WithCredentialChecks(opts ...vc.CheckOption) Option {
	return func(v *Service) { v.checks = append(v.checks, opts...) }
}

// WithSessionIssuer makes Verify open a session (terminate mode). Without
// it, Verified.SessionID is empty.
func WithSessionIssuer(s SessionIssuer) Option { return func(v *Service) { v.sessions = s } }

// WithSupportedMethods restricts the signature methods offered and accepted
// to a subset of "Ed25519", "P-256" and "secp256k1" (the default: all
// three; aliases such as "EdDSA", "ES256", "ES256K" are understood). An
// agent key of another type is not used to verify.
func WithSupportedMethods(methods ...string) Option {
	return func(v *Service) { v.methods = canonicalMethods(methods) }
}

// New returns a Service. It fails if the store, resolver or credential
// verifier is missing, or a duration or method list is invalid.
func New(opts ...Option) (*Service, error) {
	s := &Service{
		now:     time.Now,
		ttl:     DefaultChallengeTTL,
		skew:    DefaultSkew,
		methods: []string{MethodEd25519, MethodP256, MethodSecp256k1},
	}
	for _, o := range opts {
		o(s)
	}
	switch {
	case s.store == nil:
		return nil, errors.New("challenge: a nonce store is required")
	case s.resolver == nil:
		return nil, errors.New("challenge: a DID resolver is required")
	case s.creds == nil:
		return nil, errors.New("challenge: a credential verifier is required")
	case s.ttl < time.Second:
		return nil, errors.New("challenge: challenge TTL must be at least 1s")
	case s.skew < 0:
		return nil, errors.New("challenge: skew must not be negative")
	case len(s.methods) == 0:
		return nil, errors.New("challenge: no supported signature method")
	case s.key != nil && len(s.key) < minChallengeKey:
		return nil, errors.New("challenge: a challenge key must be at least 32 bytes")
	}
	return s, nil
}

// SupportedMethods returns the signature methods the service accepts.
func (s *Service) SupportedMethods() []string { return append([]string(nil), s.methods...) }

// retention is how long the store keeps a record: the challenge TTL plus
// the skew, so an answer arriving up to a skew late is told "expired"
// (-32001) rather than "unknown" (-32003).
func (s *Service) retention(ttl time.Duration) time.Duration { return ttl + s.skew }

// Issue answers a handshake: it creates a random challenge and nonce
// (crypto/rand, base64url, 256 and 192 bits) and stores the challenge under
// the nonce, bound to p.AgentDID, for the challenge TTL. If p lists
// supportedMethods, the result offers the ones the service also accepts
// (none in common is ErrInvalidParams); otherwise all of them. With a
// challenge key (WithChallengeKey), nothing is stored: the challenge is a
// MAC of the nonce and the agent DID (stateless.go).
func (s *Service) Issue(ctx context.Context, p HandshakeParams) (HandshakeResult, error) {
	if err := p.validate(); err != nil {
		return HandshakeResult{}, err
	}
	methods := s.methods
	if len(p.SupportedMethods) > 0 {
		methods = intersectMethods(s.methods, canonicalMethods(p.SupportedMethods))
		if len(methods) == 0 {
			return HandshakeResult{}, fmt.Errorf("%w: no supported signature method in common", ErrInvalidParams)
		}
	}
	if s.key != nil {
		return s.issueStateless(p, methods)
	}
	now := s.now()
	rec := Record{AgentDID: agentRef(p.AgentDID), IssuedAt: now, ExpiresAt: now.Add(s.ttl)}
	var err error
	if rec.Challenge, err = randomToken(challengeBytes); err != nil {
		return HandshakeResult{}, err
	}
	// A nonce collision is practically impossible; retry once anyway.
	for range 2 {
		var nonce string
		if nonce, err = randomToken(nonceBytes); err != nil {
			return HandshakeResult{}, err
		}
		err = s.store.Put(ctx, nonce, rec, s.retention(s.ttl))
		if err == nil {
			return HandshakeResult{
				Challenge:        rec.Challenge,
				Nonce:            nonce,
				SupportedMethods: append([]string(nil), methods...),
				ExpiresIn:        int64(s.ttl / time.Second),
			}, nil
		}
		if !errors.Is(err, ErrNonceExists) {
			break
		}
	}
	return HandshakeResult{}, fmt.Errorf("challenge: storing challenge: %w", err)
}

// Register records a challenge issued by someone else (proxy mode: the
// upstream's handshake result, seen on its way back to the agent), so the
// edge enforces single use of it too. The lifetime is hr.ExpiresIn capped
// at the challenge TTL.
func (s *Service) Register(ctx context.Context, agentDID string, hr HandshakeResult) error {
	if err := validateDID(agentDID); err != nil {
		return err
	}
	if err := validateToken(hr.Challenge, "challenge"); err != nil {
		return err
	}
	if err := validateToken(hr.Nonce, "nonce"); err != nil {
		return err
	}
	ttl := s.ttl
	if hr.ExpiresIn > 0 && time.Duration(hr.ExpiresIn)*time.Second < ttl {
		ttl = time.Duration(hr.ExpiresIn) * time.Second
	}
	if c, ok := s.store.(ChallengeCounter); ok && s.proxyBound >= 0 {
		bound := s.proxyBound
		if bound == 0 {
			bound = DefaultProxyChallengeBound
		}
		err := c.CountChallenge(ctx, s.retention(s.ttl), bound)
		if err != nil && !errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("challenge: counting proxied challenges: %w", err)
		}
	}
	now := s.now()
	rec := Record{Challenge: hr.Challenge, AgentDID: agentRef(agentDID), IssuedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.store.Put(ctx, hr.Nonce, rec, s.retention(ttl)); err != nil {
		return fmt.Errorf("challenge: storing challenge: %w", err)
	}
	return nil
}

// Verified is the outcome of a successful Verify.
type Verified struct {
	AgentDID string
	UserDID  string
	Scopes   []string
	// SessionID and ExpiresAt come from the SessionIssuer; without one,
	// SessionID is empty and ExpiresAt is the credential's expiry.
	SessionID string
	ExpiresAt time.Time
	// KeyID is the verification method that signed the challenge.
	KeyID string
	// Delegation is the verified credential.
	Delegation *vc.Delegation
}

// Result returns the JSON-RPC result for v.
func (v *Verified) Result() VerifyResult {
	scopes := v.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return VerifyResult{
		Verified:  true,
		SessionID: v.SessionID,
		AgentDID:  v.AgentDID,
		UserDID:   v.UserDID,
		Scopes:    scopes,
		ExpiresAt: v.ExpiresAt.UTC().Truncate(time.Second),
	}
}

// Verify checks an answer, in this order:
//
//  1. params well formed (ErrInvalidParams);
//  2. timestamp within the skew of the edge's clock: too old is ErrExpired,
//     too far ahead ErrBadProof;
//     (a nonce of the stateless form, with a challenge key, is checked
//     from here by verifyStateless, which writes only after step 6);
//  3. when the store is a Peeker, the record under the nonce is read
//     without consuming it: unknown or already used is ErrReplay, a store
//     failure ErrStoreUnavailable; the record must not have expired
//     (ErrExpired), and its challenge and agent DID must be the ones
//     answered (compared in constant time; ErrBadProof);
//  4. proofValue is a signature by a key in the agent DID's authentication
//     relationship over SigningInput (ErrBadProof): a signedChallenge
//     naming another agent's DID fails here;
//  5. the nonce is consumed atomically: unknown or already used is
//     ErrReplay, a store failure ErrStoreUnavailable; the record consumed
//     must be the one read at step 3 (ErrReplay), and passes the checks of
//     step 3 (for a store without Peek, this is where they are made);
//  6. the credential verifies, with the service's and the given checks, and
//     names the same agent (ErrUntrustedCredential);
//  7. a session is issued when a SessionIssuer is set.
//
// Nothing is consumed before the answer is known to be the right one:
// consuming first would let anyone who sees a nonce (logs, a proxy, a
// shoulder surfer) burn the agent's challenge. With a Peeker, the nonce is
// spent only by an answer to the challenge issued under it, naming the
// agent it was issued to, signed by that agent's key. With a store that
// cannot peek, the signature is still checked first, so only a holder of
// some agent key can spend a nonce, but a different agent that learned
// the nonce could spend it with its own valid signature (the rightful
// agent then starts a new handshake).
func (s *Service) Verify(ctx context.Context, p VerifyParams, checks ...vc.CheckOption) (*Verified, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	sc := &p.SignedChallenge
	now := s.now()

	ts, err := sc.Timestamp.Time()
	if err != nil {
		return nil, err
	}
	switch {
	case ts.Before(now.Add(-s.skew)):
		return nil, fmt.Errorf("%w: timestamp too old", ErrExpired)
	case ts.After(now.Add(s.skew)):
		return nil, fmt.Errorf("%w: timestamp in the future", ErrBadProof)
	}
	if s.key != nil {
		if n, ok := parseStatelessNonce(sc.Nonce); ok {
			return s.verifyStateless(ctx, &p, n, now, checks)
		}
	}

	peeked, didPeek, err := s.peek(ctx, sc.Nonce)
	if err != nil {
		return nil, err
	}
	if didPeek {
		if err := checkRecord(peeked, sc, now); err != nil {
			return nil, err
		}
	}

	kid, err := s.checkProof(ctx, sc)
	if err != nil {
		return nil, err
	}

	rec, err := s.store.Consume(ctx, sc.Nonce)
	switch {
	case errors.Is(err, ErrNonceNotFound):
		return nil, fmt.Errorf("%w: %w", ErrReplay, err)
	case err != nil:
		return nil, err
	}
	if didPeek && !sameRecord(rec, peeked) {
		// Consumed by another answer and stored again in between.
		return nil, fmt.Errorf("%w: challenge replaced while being answered", ErrReplay)
	}
	if err := checkRecord(rec, sc, now); err != nil {
		return nil, err
	}

	d, err := s.verifyCredential(ctx, &p, checks)
	if err != nil {
		return nil, err
	}
	return s.verified(ctx, sc.AgentDID, kid, d)
}

// verifyCredential verifies the credential of p with the service's and
// the given checks; it must delegate to the agent that signed.
func (s *Service) verifyCredential(ctx context.Context, p *VerifyParams, checks []vc.CheckOption) (*vc.Delegation, error) {
	raw, err := p.credentialBytes()
	if err != nil {
		return nil, err
	}
	all := append(append([]vc.CheckOption(nil), s.checks...), checks...)
	d, err := s.creds.Verify(ctx, raw, all...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUntrustedCredential, err)
	}
	if d == nil || d.AgentDID != p.SignedChallenge.AgentDID {
		return nil, fmt.Errorf("%w: credential delegates to another agent", ErrUntrustedCredential)
	}
	return d, nil
}

// verified is the outcome of an answer that passed every check: a session
// is issued when a SessionIssuer is set.
func (s *Service) verified(ctx context.Context, agentDID, kid string, d *vc.Delegation) (*Verified, error) {
	v := &Verified{
		AgentDID:   agentDID,
		UserDID:    d.UserDID,
		Scopes:     append([]string(nil), d.Scopes...),
		ExpiresAt:  d.ExpiresAt,
		KeyID:      kid,
		Delegation: d,
	}
	if s.sessions != nil {
		id, exp, err := s.sessions.IssueSession(ctx, d, agentDID)
		if err != nil {
			return nil, fmt.Errorf("challenge: issuing session: %w", err)
		}
		v.SessionID, v.ExpiresAt = id, exp
	}
	return v, nil
}

// peek reads the record under nonce when the store can (ok), without
// consuming it. A store without Peek, or whose Peek is unsupported, gives
// ok false and no error.
func (s *Service) peek(ctx context.Context, nonce string) (rec Record, ok bool, err error) {
	pk, can := s.store.(Peeker)
	if !can {
		return Record{}, false, nil
	}
	rec, err = pk.Peek(ctx, nonce)
	switch {
	case err == nil:
		return rec, true, nil
	case errors.Is(err, errors.ErrUnsupported):
		return Record{}, false, nil
	case errors.Is(err, ErrNonceNotFound):
		return Record{}, false, fmt.Errorf("%w: %w", ErrReplay, err)
	default:
		return Record{}, false, err
	}
}

// checkRecord checks an answer against the stored record: still within its
// lifetime, and answering the challenge issued under the nonce, as the
// agent it was issued to (both compared in constant time).
func checkRecord(rec Record, sc *SignedChallenge, now time.Time) error {
	if !now.Before(rec.ExpiresAt) {
		return fmt.Errorf("%w: challenge lifetime over", ErrExpired)
	}
	challengeOK := subtle.ConstantTimeCompare([]byte(rec.Challenge), []byte(sc.Challenge)) == 1
	agentOK := IssuedTo(rec, sc.AgentDID)
	switch {
	case !challengeOK:
		return fmt.Errorf("%w: challenge does not match the nonce", ErrBadProof)
	case !agentOK:
		return fmt.Errorf("%w: challenge was issued to another agent", ErrBadProof)
	}
	return nil
}

// sameRecord reports whether a and b are one record (the times compared as
// instants: a store may have encoded them).
func sameRecord(a, b Record) bool {
	return a.Challenge == b.Challenge && a.AgentDID == b.AgentDID &&
		a.IssuedAt.Equal(b.IssuedAt) && a.ExpiresAt.Equal(b.ExpiresAt)
}

// CheckProof runs the timestamp and signature checks of Verify (steps 2
// and 4) without touching the store or the credential, and returns the id
// of the key that signed. For a proxy that leaves the nonce to the
// upstream and verifies the credential itself.
func (s *Service) CheckProof(ctx context.Context, sc SignedChallenge) (string, error) {
	if err := sc.validate(); err != nil {
		return "", err
	}
	ts, err := sc.Timestamp.Time()
	if err != nil {
		return "", err
	}
	now := s.now()
	switch {
	case ts.Before(now.Add(-s.skew)):
		return "", fmt.Errorf("%w: timestamp too old", ErrExpired)
	case ts.After(now.Add(s.skew)):
		return "", fmt.Errorf("%w: timestamp in the future", ErrBadProof)
	}
	return s.checkProof(ctx, &sc)
}

// checkProof resolves the agent DID and tries each authentication key of a
// supported type against each decoding of proofValue.
func (s *Service) checkProof(ctx context.Context, sc *SignedChallenge) (string, error) {
	msg, err := sc.SigningInput()
	if err != nil {
		return "", err
	}
	sigs := decodeProofValue(sc.ProofValue)
	if len(sigs) == 0 {
		return "", fmt.Errorf("%w: proofValue is not a 64-byte signature in multibase or base64url", ErrBadProof)
	}
	doc, err := s.resolver.Resolve(ctx, sc.AgentDID)
	if err != nil {
		return "", fmt.Errorf("%w: resolving agent DID: %w", ErrBadProof, err)
	}
	if doc == nil || doc.ID != sc.AgentDID {
		return "", fmt.Errorf("%w: agent DID document does not match the DID", ErrBadProof)
	}
	tried := 0
	for _, k := range doc.Keys(didresolver.Authentication) {
		if !s.accepts(keyMethod(k.Public)) {
			continue
		}
		if tried++; tried > maxAuthKeys {
			break
		}
		for _, sig := range sigs {
			if verifySignature(k.Public, msg, sig) {
				return k.ID, nil
			}
		}
	}
	if tried == 0 {
		return "", fmt.Errorf("%w: agent DID has no supported authentication key", ErrBadProof)
	}
	return "", fmt.Errorf("%w: signature does not verify", ErrBadProof)
}

func (s *Service) accepts(method string) bool {
	for _, m := range s.methods {
		if m == method && method != "" {
			return true
		}
	}
	return false
}

func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("challenge: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

var methodAliases = map[string]string{
	"ed25519":                    MethodEd25519,
	"eddsa":                      MethodEd25519,
	"ed25519verificationkey2018": MethodEd25519,
	"ed25519verificationkey2020": MethodEd25519,
	"p-256":                      MethodP256,
	"p256":                       MethodP256,
	"es256":                      MethodP256,
	"secp256r1":                  MethodP256,
	"ecdsa-p256":                 MethodP256,
	"secp256k1":                  MethodSecp256k1,
	"es256k":                     MethodSecp256k1,
	"ecdsasecp256k1":             MethodSecp256k1,
}

// canonicalMethods maps names to canonical method names, dropping unknown
// ones and duplicates, keeping order.
func canonicalMethods(names []string) []string {
	var out []string
	for _, n := range names {
		c, ok := methodAliases[strings.ToLower(strings.TrimSpace(n))]
		if !ok {
			continue
		}
		dup := false
		for _, o := range out {
			dup = dup || o == c
		}
		if !dup {
			out = append(out, c)
		}
	}
	return out
}

// intersectMethods returns the methods of ours also in theirs, in our order.
func intersectMethods(ours, theirs []string) []string {
	var out []string
	for _, o := range ours {
		for _, t := range theirs {
			if o == t {
				out = append(out, o)
				break
			}
		}
	}
	return out
}
