package mcpiverify

import (
	"fmt"
	"net/http"
	"time"
)

// Defaults.
const (
	DefaultFetchTimeout    = 5 * time.Second
	DefaultMaxJWKSSize     = 64 << 10
	DefaultCacheTTL        = 5 * time.Minute
	DefaultRefetchInterval = 10 * time.Second
	DefaultClockSkew       = 30 * time.Second
	// MaxLifetime is the longest exp-iat an assertion may claim (the edge
	// never signs longer ones).
	MaxLifetime = 300 * time.Second
	// maxTokenSize caps the header value before any parsing.
	maxTokenSize = 16 << 10
)

// Option configures NewVerifier and Middleware.
type Option func(*Verifier)

// WithJWKSURL sets where the edge publishes its keys, typically
// "https://<edge>/.well-known/jwks.json". Required.
func WithJWKSURL(url string) Option { return func(v *Verifier) { v.jwksURL = url } }

// WithAudience sets the identifiers of this service; the assertion's aud
// must equal one of them. Required.
func WithAudience(aud ...string) Option {
	return func(v *Verifier) { v.audiences = append(v.audiences, aud...) }
}

// WithIssuer requires the assertion's iss to equal the edge's DID
// (for example "did:web:edge.example.com"). Optional but recommended.
func WithIssuer(edgeDID string) Option { return func(v *Verifier) { v.issuer = edgeDID } }

// WithHTTPClient sets the client used to fetch the JWKS.
func WithHTTPClient(c *http.Client) Option {
	return func(v *Verifier) {
		if c != nil {
			v.client = c
		}
	}
}

// WithFetchTimeout bounds one JWKS fetch. Default 5s.
func WithFetchTimeout(d time.Duration) Option { return func(v *Verifier) { v.fetchTimeout = d } }

// WithMaxJWKSSize caps the fetched JWKS document. Default 64 KiB.
func WithMaxJWKSSize(n int64) Option { return func(v *Verifier) { v.maxJWKSSize = n } }

// WithCacheTTL sets how long fetched keys are used before the JWKS is
// fetched again. Default 5m. When a refetch fails, the previous keys stay in
// use for at most one more TTL.
func WithCacheTTL(d time.Duration) Option { return func(v *Verifier) { v.ttl = d } }

// WithRefetchInterval is the minimum time between two fetches outside the
// TTL schedule (an unknown kid, or a failed fetch). Default 10s.
func WithRefetchInterval(d time.Duration) Option { return func(v *Verifier) { v.refetchInterval = d } }

// WithClockSkew tolerated on exp and iat. Default 30s.
func WithClockSkew(d time.Duration) Option { return func(v *Verifier) { v.skew = d } }

// WithClock injects the clock. Default time.Now.
func WithClock(now func() time.Time) Option {
	return func(v *Verifier) {
		if now != nil {
			v.now = now
		}
	}
}

// WithAllowedAlgs restricts the accepted JWS algorithms to a subset of
// EdDSA and ES256 (the default: both). Anything else is refused.
func WithAllowedAlgs(algs ...string) Option {
	return func(v *Verifier) { v.algs = append([]string(nil), algs...) }
}

// Optional makes the middleware let requests without X-Verified-Delegation
// through, without an Identity (and with X-Agent-DID and X-User-DID removed,
// since nothing vouches for them). A header that is present must still
// verify.
func Optional() Option { return func(v *Verifier) { v.optional = true } }

// WithErrorHandler replaces the middleware's rejection response (by default
// a JSON body, 401, or 503 when the JWKS cannot be fetched).
func WithErrorHandler(h func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(v *Verifier) {
		if h != nil {
			v.onError = h
		}
	}
}

func (v *Verifier) validate() error {
	if v.jwksURL == "" {
		return fmt.Errorf("mcpiverify: WithJWKSURL is required")
	}
	if len(v.audiences) == 0 {
		return fmt.Errorf("mcpiverify: WithAudience is required")
	}
	for _, a := range v.audiences {
		if a == "" {
			return fmt.Errorf("mcpiverify: empty audience")
		}
	}
	if len(v.algs) == 0 {
		return fmt.Errorf("mcpiverify: no algorithm allowed")
	}
	for _, a := range v.algs {
		if a != "EdDSA" && a != "ES256" {
			return fmt.Errorf("mcpiverify: algorithm %q not supported (EdDSA, ES256)", a)
		}
	}
	if v.fetchTimeout <= 0 || v.maxJWKSSize <= 0 || v.ttl <= 0 || v.refetchInterval < 0 || v.skew < 0 {
		return fmt.Errorf("mcpiverify: timeouts, sizes and TTL must be positive")
	}
	return nil
}
