// Package mcpiverify is for the authors of services behind a caddy-mcpi
// edge (MCP-I Level 2, docs/protocol/mcpi.md#level-2-what-the-upstream-is-told). The edge verifies an agent's
// delegation credential and forwards the request with X-Verified-Delegation,
// a compact JWS (typ "mcpi-delegation+jwt") it signs with its own key. This
// package verifies that header against the edge's JWKS and hands the
// handler an Identity: the agent, the user it acts for, the granted scopes.
//
//	h := mcpiverify.Middleware(app,
//		mcpiverify.WithJWKSURL("https://edge.example.com/.well-known/jwks.json"),
//		mcpiverify.WithIssuer("did:web:edge.example.com"),
//		mcpiverify.WithAudience("did:web:api.example.com"),
//	)
//	// in app:
//	id, ok := mcpiverify.FromContext(r.Context())
//
// Notes for service authors:
//   - The edge may send the same assertion (same jti) for repeated requests
//     of one credential while it is fresh: jti is not a one-time nonce.
//   - In the edge's hash-reference mode the header carries only
//     "sha256:<hex>", which proves nothing by itself; Verify rejects it
//     (ErrHashReference).
//
// It depends on the standard library and jwx only.
package mcpiverify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
)

// Header names.
const (
	HeaderVerifiedDelegation = "X-Verified-Delegation"
	HeaderAgentDID           = "X-Agent-DID"
	HeaderUserDID            = "X-User-DID"
	// Type is the JWS typ of an assertion.
	Type = "mcpi-delegation+jwt"
)

// Errors. Every error Verify returns wraps exactly one of these; their text
// never contains the token.
var (
	ErrMissing         = errors.New("no verified delegation presented")
	ErrMalformed       = errors.New("verified delegation malformed")
	ErrHashReference   = errors.New("verified delegation is a hash reference only")
	ErrType            = errors.New("verified delegation has the wrong type")
	ErrAlgorithm       = errors.New("verified delegation algorithm not allowed")
	ErrUnknownKey      = errors.New("verified delegation signed by an unknown key")
	ErrSignature       = errors.New("verified delegation signature invalid")
	ErrExpired         = errors.New("verified delegation expired")
	ErrNotYetValid     = errors.New("verified delegation not yet valid")
	ErrLifetime        = errors.New("verified delegation lifetime too long")
	ErrAudience        = errors.New("verified delegation audience does not match")
	ErrIssuer          = errors.New("verified delegation issuer does not match")
	ErrHeaderMismatch  = errors.New("identity headers do not match the verified delegation")
	ErrJWKSUnavailable = errors.New("edge keys unavailable")
)

var reasons = []struct {
	err    error
	reason string
}{
	{ErrMissing, "missing"},
	{ErrMalformed, "malformed"},
	{ErrHashReference, "hash_reference"},
	{ErrType, "type"},
	{ErrAlgorithm, "algorithm"},
	{ErrUnknownKey, "unknown_key"},
	{ErrSignature, "bad_signature"},
	{ErrExpired, "expired"},
	{ErrNotYetValid, "not_yet_valid"},
	{ErrLifetime, "lifetime"},
	{ErrAudience, "audience"},
	{ErrIssuer, "issuer"},
	{ErrHeaderMismatch, "header_mismatch"},
	{ErrJWKSUnavailable, "jwks_unavailable"},
}

// Reason returns a short stable string for an error from Verify (for logs,
// metrics and response bodies), or "invalid".
func Reason(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "invalid"
}

// Identity is what a verified assertion says about the caller.
type Identity struct {
	// AgentDID is the agent making the request (act.sub).
	AgentDID string
	// UserDID is the user the agent acts for (sub).
	UserDID string
	// Scopes granted by the delegation.
	Scopes []string
	// DelegationID identifies the delegation (may be empty).
	DelegationID string
	// VCHash is "sha256:<hex>" of the credential the agent presented.
	VCHash string
	// Issuer is the edge's DID (iss).
	Issuer string
	// IssuedAt and ExpiresAt bound the assertion.
	IssuedAt, ExpiresAt time.Time
	// TokenID is the jti. It is not single-use (see the package doc).
	TokenID string
}

// HasScopes reports whether every one of required is granted (exact match).
func (id *Identity) HasScopes(required ...string) bool {
	for _, r := range required {
		if !slices.Contains(id.Scopes, r) {
			return false
		}
	}
	return true
}

type ctxKey struct{}

// NewContext returns ctx carrying id (for handler tests).
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the Identity the middleware stored, if any.
func FromContext(ctx context.Context) (*Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(*Identity)
	return id, ok && id != nil
}

// Verifier verifies X-Verified-Delegation assertions. Safe for concurrent
// use; it starts no goroutines.
type Verifier struct {
	jwksURL         string
	audiences       []string
	issuer          string
	client          *http.Client
	fetchTimeout    time.Duration
	maxJWKSSize     int64
	ttl             time.Duration
	refetchInterval time.Duration
	skew            time.Duration
	algs            []string
	now             func() time.Time
	optional        bool
	onError         func(http.ResponseWriter, *http.Request, error)

	keys        atomic.Pointer[keyCache]
	fetchMu     sync.Mutex
	lastAttempt time.Time // guarded by fetchMu
	lastErr     error     // guarded by fetchMu
}

// NewVerifier returns a Verifier. WithJWKSURL and WithAudience are
// required. Keys are fetched on first use.
func NewVerifier(opts ...Option) (*Verifier, error) {
	v := &Verifier{
		client:          &http.Client{}, // bounded per fetch by the fetch timeout
		fetchTimeout:    DefaultFetchTimeout,
		maxJWKSSize:     DefaultMaxJWKSSize,
		ttl:             DefaultCacheTTL,
		refetchInterval: DefaultRefetchInterval,
		skew:            DefaultClockSkew,
		algs:            []string{jwa.EdDSA.String(), jwa.ES256.String()},
		now:             time.Now,
		onError:         writeError,
	}
	for _, o := range opts {
		o(v)
	}
	if err := v.validate(); err != nil {
		return nil, err
	}
	return v, nil
}

// claims is the payload of an assertion. Numeric dates are json.Number so
// that a non-integer or absurd value is caught, not silently truncated.
type claims struct {
	Iss string          `json:"iss"`
	Aud json.RawMessage `json:"aud"`
	Iat json.Number     `json:"iat"`
	Exp json.Number     `json:"exp"`
	Nbf json.Number     `json:"nbf"`
	Jti string          `json:"jti"`
	Sub string          `json:"sub"`
	Act struct {
		Sub string `json:"sub"`
	} `json:"act"`
	Scope        string `json:"scope"`
	DelegationID string `json:"delegation_id"`
	VCHash       string `json:"vc_hash"`
}

// Verify verifies an X-Verified-Delegation value and returns the identity.
// ctx bounds nothing but is passed to the JWKS fetch (which runs to its own
// timeout even if ctx is cancelled, since other requests may wait on it).
func (v *Verifier) Verify(ctx context.Context, token string) (*Identity, error) {
	switch {
	case token == "":
		return nil, ErrMissing
	case len(token) > maxTokenSize:
		return nil, fmt.Errorf("%w: too large", ErrMalformed)
	case strings.HasPrefix(token, "sha256:"):
		return nil, ErrHashReference
	case strings.Count(token, ".") != 2 || strings.ContainsAny(token, " \t\r\n{"):
		return nil, fmt.Errorf("%w: not a compact JWS", ErrMalformed)
	}
	var (
		providerErr error
		keyGiven    bool
	)
	provider := jws.KeyProviderFunc(func(ctx context.Context, sink jws.KeySink, sig *jws.Signature, _ *jws.Message) error {
		alg, key, err := v.keyFor(ctx, sig.ProtectedHeaders())
		if err != nil {
			providerErr = err
			return err
		}
		keyGiven = true
		sink.Key(alg, key)
		return nil
	})
	payload, err := jws.Verify([]byte(token), jws.WithKeyProvider(provider), jws.WithContext(ctx))
	switch {
	case providerErr != nil:
		return nil, providerErr
	case err != nil && keyGiven:
		return nil, ErrSignature
	case err != nil:
		return nil, fmt.Errorf("%w: not a valid JWS", ErrMalformed)
	}
	return v.checkClaims(payload)
}

// keyFor checks the protected header and returns the key to verify with.
func (v *Verifier) keyFor(ctx context.Context, h jws.Headers) (jwa.SignatureAlgorithm, any, error) {
	if !isType(h.Type()) {
		return "", nil, ErrType
	}
	alg := h.Algorithm().String()
	if !slices.Contains(v.algs, alg) {
		return "", nil, ErrAlgorithm
	}
	// No extensions are understood: refuse crit (RFC 7515 §4.1.11) and the
	// unencoded-payload option it would carry.
	for _, name := range []string{jws.CriticalKey, "b64"} {
		if _, ok := h.Get(name); ok {
			return "", nil, fmt.Errorf("%w: header %q not supported", ErrMalformed, name)
		}
	}
	kid := h.KeyID()
	if kid == "" {
		return "", nil, fmt.Errorf("%w: no kid", ErrMalformed)
	}
	k, err := v.lookupKey(ctx, kid)
	if err != nil {
		return "", nil, err
	}
	if k.alg != alg {
		return "", nil, ErrAlgorithm
	}
	return jwa.SignatureAlgorithm(alg), k.key, nil
}

// isType accepts typ "mcpi-delegation+jwt", case-insensitively and with an
// optional "application/" prefix (RFC 7515 §4.1.9).
func isType(typ string) bool {
	typ = strings.ToLower(typ)
	return typ == Type || typ == "application/"+Type
}

// numericDate parses a JWT NumericDate; ok is false when absent.
func numericDate(n json.Number) (t time.Time, ok bool, err error) {
	if n == "" {
		return time.Time{}, false, nil
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || f < 0 || f > 1<<40 {
		return time.Time{}, false, fmt.Errorf("%w: bad numeric date", ErrMalformed)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true, nil
}

func (v *Verifier) checkClaims(payload []byte) (*Identity, error) {
	var c claims
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: claims", ErrMalformed)
	}
	iat, hasIat, err := numericDate(c.Iat)
	if err != nil {
		return nil, err
	}
	exp, hasExp, err := numericDate(c.Exp)
	if err != nil {
		return nil, err
	}
	nbf, hasNbf, err := numericDate(c.Nbf)
	if err != nil {
		return nil, err
	}
	switch {
	case !hasIat || !hasExp:
		return nil, fmt.Errorf("%w: iat and exp are required", ErrMalformed)
	case c.Iss == "" || c.Sub == "" || c.Act.Sub == "" || len(c.Aud) == 0:
		return nil, fmt.Errorf("%w: iss, sub, act.sub and aud are required", ErrMalformed)
	case !validHashRef(c.VCHash):
		return nil, fmt.Errorf("%w: vc_hash", ErrMalformed)
	}
	now := v.now()
	switch {
	case !now.Before(exp.Add(v.skew)):
		return nil, ErrExpired
	case iat.After(now.Add(v.skew)) || (hasNbf && nbf.After(now.Add(v.skew))):
		return nil, ErrNotYetValid
	case exp.Sub(iat) > MaxLifetime || exp.Before(iat):
		return nil, ErrLifetime
	case !v.audienceOK(c.Aud):
		return nil, ErrAudience
	case v.issuer != "" && c.Iss != v.issuer:
		return nil, ErrIssuer
	}
	return &Identity{
		AgentDID:     c.Act.Sub,
		UserDID:      c.Sub,
		Scopes:       strings.Fields(c.Scope),
		DelegationID: c.DelegationID,
		VCHash:       c.VCHash,
		Issuer:       c.Iss,
		IssuedAt:     iat,
		ExpiresAt:    exp,
		TokenID:      c.Jti,
	}, nil
}

// audienceOK: aud (a string, or an array of strings) names one of ours.
func (v *Verifier) audienceOK(raw json.RawMessage) bool {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return slices.Contains(v.audiences, one)
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return false
	}
	for _, a := range many {
		if slices.Contains(v.audiences, a) {
			return true
		}
	}
	return false
}

func validHashRef(s string) bool {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range []byte(hex) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
