package vc

// CONTRACT STUB: the vc helper replaces this file with the real
// implementation (verify.go, options.go, jwt.go, jsonvc.go, …). The
// signatures here are the contract other packages code against; keep them.

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// Verifier verifies delegation credentials. Safe for concurrent use.
type Verifier struct{}

// Option configures a Verifier.
type Option func(*Verifier)

// WithClock injects the clock. Default time.Now.
func WithClock(now func() time.Time) Option { panic("stub") }

// WithClockSkew tolerated on every date check. Default 60s.
func WithClockSkew(d time.Duration) Option { panic("stub") }

// WithAllowedAlgs restricts JWS algorithms to a subset of EdDSA, ES256K,
// ES256 (the default, and the maximum: anything else is refused).
func WithAllowedAlgs(algs ...string) Option { panic("stub") }

// WithMaxSize caps the presented credential. Default 64 KiB.
func WithMaxSize(n int) Option { panic("stub") }

// WithTrustedIssuers accepts only credentials whose (root) issuer is one of
// dids. Without it (or with AnyIssuer) every resolvable issuer is accepted.
func WithTrustedIssuers(dids ...string) Option { panic("stub") }

// NewVerifier returns a Verifier resolving issuer keys with r.
func NewVerifier(r didresolver.Resolver, opts ...Option) *Verifier { panic("stub") }

// CheckOption adds per-request rules to one Verify call.
type CheckOption func(*checks)

type checks struct {
	audiences       []string
	requireAudience bool
	requiredScopes  []string
}

// ForAudience: if the credential names an audience, one of its values must
// equal one of audiences. A credential naming none passes unless
// RequireAudience is also given (real KYA-OS mints carry no aud).
func ForAudience(audiences ...string) CheckOption { panic("stub") }

// RequireAudience rejects credentials that name no audience.
func RequireAudience() CheckOption { panic("stub") }

// RequireScopes: every scope must be granted (exact match).
func RequireScopes(scopes ...string) CheckOption { panic("stub") }

// Verify verifies raw (a compact JWS or a JSON credential), in the order of
// MCPI-WIRE §2, and returns the delegation.
func (v *Verifier) Verify(ctx context.Context, raw []byte, opts ...CheckOption) (*Delegation, error) {
	panic("stub")
}

// Reason returns a short stable reason for an error from Verify
// ("expired", "bad_signature", …), or "invalid" for anything else.
func Reason(err error) string { panic("stub") }

// Template is a delegation to issue (for the operator CLI, the demo and tests).
type Template struct {
	AgentDID  string   // credentialSubject.id, required
	UserDID   string   // delegation.userDid, optional
	Audience  []string // JWT aud and delegation.constraints.audience
	Scopes    []string // delegation.scopes and constraints.scopes
	NotBefore time.Time
	ExpiresAt time.Time // required
	ID        string    // default: "urn:uuid:<random>"
}

// IssueJWT signs t as a VC 1.1 VC-JWT in the KYA-OS shape (header alg by key
// type, typ "JWT", kid; claims iss, sub, aud, nbf, iat, exp, jti, vc with
// credentialSubject.delegation). key is ed25519.PrivateKey,
// *ecdsa.PrivateKey (P-256) or *secp256k1.PrivateKey; kid is the issuer's
// verification method id (its DID part is the issuer).
func IssueJWT(key crypto.PrivateKey, kid string, t Template) (string, error) { panic("stub") }

// IssueJSON signs t as an MCP-I JSON VC with an Ed25519Signature2020 proof
// (base64url signature over JCS of the credential without proof).
func IssueJSON(key ed25519.PrivateKey, kid string, t Template) ([]byte, error) { panic("stub") }
