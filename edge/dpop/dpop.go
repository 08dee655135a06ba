// Package dpop checks DPoP proofs (RFC 9449): the JWT a client signs for
// each request with the key its access token is bound to, so that a
// stolen token is useless without that key.
//
// The package knows nothing of Caddy or of the edge. The edge calls Check
// on every request that presents a bound credential; the authorization
// server calls it at the token endpoint (with no access token expected)
// to learn the key a new credential is bound to.
package dpop

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/internal/ed25519v"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// Proof is what a checked proof establishes.
type Proof struct {
	// JKT is the RFC 7638 SHA-256 thumbprint of the proof's key,
	// base64url without padding: what a bound token's cnf.jkt must equal.
	JKT string
	// Key is the proof's public key.
	Key jwk.Key
	// Public is Key as a Go public key (ed25519.PublicKey or
	// *ecdsa.PublicKey), e.g. for didresolver.JWKDID.
	Public crypto.PublicKey
	// JTI is the proof's unique identifier.
	JTI string
	// IssuedAt is the proof's iat.
	IssuedAt time.Time
	// Alg is the algorithm the proof was signed with.
	Alg string
}

// Expect is the request a proof must be for.
type Expect struct {
	// Method is the request's HTTP method; htm must equal it exactly.
	Method string
	// URL is the request's absolute URL as the client addressed it. htu
	// is compared with it without query and fragment, after normalising
	// both (scheme and host case, default port, percent-encoding, dot
	// segments).
	URL string
	// AccessToken is the token presented with the proof, or "" at the
	// token endpoint. When set, ath must be the base64url SHA-256 of it.
	AccessToken string
}

// ReplayStore remembers the proofs used, so that each is accepted once;
// challenge.SingleUse, which the memory and Redis nonce stores implement,
// shared by every replica using the store. UseOnce fails with
// challenge.ErrNonceExists for a digest already used, and with an error
// wrapping challenge.ErrStoreUnavailable when it cannot tell.
type ReplayStore interface {
	UseOnce(ctx context.Context, digest [32]byte, ttl time.Duration) error
}

// Checker checks proofs. It is safe for concurrent use.
type Checker struct {
	store     ReplayStore
	algs      algSet
	maxAge    time.Duration
	maxFuture time.Duration
	now       func() time.Time
}

// NewChecker returns a Checker that remembers used proofs in store.
// Defaults: EdDSA and ES256, iat at most DefaultMaxAge old and
// DefaultMaxFuture ahead, the system clock.
func NewChecker(store ReplayStore, opts ...Option) *Checker {
	c := &Checker{
		store:     store,
		algs:      algEdDSA | algES256,
		maxAge:    DefaultMaxAge,
		maxFuture: DefaultMaxFuture,
		now:       time.Now,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// ProofHeader returns the one DPoP header of a request: ErrMissing when
// there is none or it is empty, ErrMalformed when there are several
// (RFC 9449 §4.3: exactly one).
func ProofHeader(h http.Header) (string, error) {
	v := h.Values("DPoP")
	switch {
	case len(v) > 1:
		return "", fmt.Errorf("%w (more than one DPoP header)", ErrMalformed)
	case len(v) == 0 || strings.TrimSpace(v[0]) == "":
		return "", ErrMissing
	}
	return strings.TrimSpace(v[0]), nil
}

// Check verifies proofJWT for the request want describes, then marks it
// used: everything that can be checked without the replay store is
// checked first, so a proof nobody signed never costs a store entry.
//
// The jti marker is made under ctx: at the token endpoint, where proofs
// come from anyone, pass challenge.Unbound(ctx) so that they cannot crowd
// out the proofs of callers holding verified credentials.
func (c *Checker) Check(ctx context.Context, proofJWT string, want Expect) (Proof, error) {
	if proofJWT == "" {
		return Proof{}, ErrMissing
	}
	p, claims, err := c.parse(proofJWT)
	if err != nil {
		return Proof{}, err
	}
	now := c.now()
	if p.IssuedAt.Before(now.Add(-c.maxAge)) || p.IssuedAt.After(now.Add(c.maxFuture)) {
		return Proof{}, ErrStale
	}
	if claims.htm != want.Method {
		return Proof{}, fmt.Errorf("%w (htm is not the request's method)", ErrMismatch)
	}
	got, err := normalizeHTU(claims.htu)
	if err != nil {
		return Proof{}, fmt.Errorf("%w (htu: %v)", ErrMalformed, err)
	}
	if exp, err := normalizeHTU(want.URL); err != nil || got != exp {
		return Proof{}, fmt.Errorf("%w (htu is not the request's URL)", ErrMismatch)
	}
	if want.AccessToken != "" {
		sum := sha256.Sum256([]byte(want.AccessToken))
		ath := base64.RawURLEncoding.EncodeToString(sum[:])
		if subtle.ConstantTimeCompare([]byte(claims.ath), []byte(ath)) != 1 {
			return Proof{}, fmt.Errorf("%w (ath is not the hash of the access token presented)", ErrMismatch)
		}
	}
	// The marker lives as long as iat keeps the proof acceptable: a proof
	// dated maxFuture ahead stays fresh maxAge after that.
	if err := c.store.UseOnce(ctx, jtiDigest(p.JKT, p.JTI), c.maxAge+c.maxFuture); err != nil {
		switch {
		case errors.Is(err, challenge.ErrNonceExists):
			return Proof{}, ErrReplayed
		case errors.Is(err, challenge.ErrStoreUnavailable):
			return Proof{}, fmt.Errorf("dpop: cannot record the proof as used, refusing it: %w", err)
		}
		return Proof{}, fmt.Errorf("dpop: cannot record the proof as used, refusing it: %w: %w", challenge.ErrStoreUnavailable, err)
	}
	return p, nil
}

// jtiDigest is the replay marker of a proof: domain-separated, so that it
// never equals another single-use record of the store (a request proof's),
// and keyed by the thumbprint, so that two clients choosing one jti do not
// refuse each other.
func jtiDigest(jkt, jti string) [32]byte {
	h := sha256.New()
	h.Write([]byte("dpop-jti\x00"))
	h.Write([]byte(jkt))
	h.Write([]byte{0})
	h.Write([]byte(jti))
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// claims are the proof claims Check compares with the request.
type claims struct {
	htm, htu, ath string
}

var (
	headerMembers  = []string{"typ", "alg", "jwk", "kid", "crit", "b64", "jku", "x5u", "x5c", "x5t", "x5t#S256", "cty", "zip", "enc"}
	payloadMembers = []string{"jti", "htm", "htu", "iat", "ath", "nonce", "exp", "nbf"}
	jwkMembers     = []string{"kty", "crv", "x", "y", "d", "alg", "use", "key_ops", "kid", "p", "q", "dp", "dq", "qi", "k", "oth", "n", "e"}
)

// parse decodes and verifies the proof's structure and signature.
func (c *Checker) parse(proofJWT string) (Proof, claims, error) {
	if len(proofJWT) > MaxProofSize {
		return Proof{}, claims{}, fmt.Errorf("%w (larger than %d bytes)", ErrMalformed, MaxProofSize)
	}
	h64, rest, ok := strings.Cut(proofJWT, ".")
	p64, s64, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || strings.Contains(s64, ".") {
		return Proof{}, claims{}, fmt.Errorf("%w (not a compact JWS of three parts)", ErrMalformed)
	}
	hdr, err := decodeObject(h64, headerMembers)
	if err != nil {
		return Proof{}, claims{}, fmt.Errorf("%w (header: %v)", ErrMalformed, err)
	}
	if str(hdr["typ"]) != "dpop+jwt" {
		return Proof{}, claims{}, fmt.Errorf("%w (typ must be \"dpop+jwt\")", ErrMalformed)
	}
	for _, m := range []string{"crit", "b64", "jku", "x5u", "x5c", "zip", "enc"} {
		if hdr[m] != nil {
			return Proof{}, claims{}, fmt.Errorf("%w (header member %q is not supported)", ErrMalformed, m)
		}
	}
	alg := str(hdr["alg"])
	bit := algBit(alg)
	if bit == 0 || c.algs&bit == 0 {
		return Proof{}, claims{}, ErrAlg
	}
	key, pub, err := publicJWK(hdr["jwk"])
	if err != nil {
		return Proof{}, claims{}, err
	}
	if keyAlg(pub) != bit {
		return Proof{}, claims{}, fmt.Errorf("%w (alg does not fit the jwk's key type)", ErrAlg)
	}
	if ka := key.Algorithm().String(); ka != "" && ka != alg {
		return Proof{}, claims{}, fmt.Errorf("%w (the jwk's alg differs from the header's)", ErrAlg)
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(s64)
	if err != nil || len(sig) == 0 {
		return Proof{}, claims{}, fmt.Errorf("%w (signature is not base64url)", ErrMalformed)
	}
	if !verify(pub, []byte(proofJWT[:len(h64)+1+len(p64)]), sig) {
		return Proof{}, claims{}, fmt.Errorf("%w (signature does not verify with the jwk header's key)", ErrMalformed)
	}
	pl, err := decodeObject(p64, payloadMembers)
	if err != nil {
		return Proof{}, claims{}, fmt.Errorf("%w (claims: %v)", ErrMalformed, err)
	}
	var cl claims
	jti, ok := strClaim(pl["jti"])
	if !ok || jti == "" || len(jti) > maxJTI {
		return Proof{}, claims{}, fmt.Errorf("%w (jti must be a string of 1 to %d bytes)", ErrMalformed, maxJTI)
	}
	if cl.htm, ok = strClaim(pl["htm"]); !ok || cl.htm == "" {
		return Proof{}, claims{}, fmt.Errorf("%w (htm must be the request's method)", ErrMalformed)
	}
	if cl.htu, ok = strClaim(pl["htu"]); !ok || cl.htu == "" {
		return Proof{}, claims{}, fmt.Errorf("%w (htu must be the request's URL)", ErrMalformed)
	}
	if raw := pl["ath"]; raw != nil {
		if cl.ath, ok = strClaim(raw); !ok {
			return Proof{}, claims{}, fmt.Errorf("%w (ath must be a string)", ErrMalformed)
		}
	}
	iat, err := numericDate(pl["iat"])
	if err != nil {
		return Proof{}, claims{}, fmt.Errorf("%w (iat: %v)", ErrMalformed, err)
	}
	jkt, err := Thumbprint(key)
	if err != nil {
		return Proof{}, claims{}, fmt.Errorf("%w (jwk: %v)", ErrMalformed, err)
	}
	return Proof{JKT: jkt, Key: key, Public: pub, JTI: jti, IssuedAt: iat, Alg: alg}, cl, nil
}

// decodeObject decodes one base64url part into its members, refusing
// repeated names and case variants of the known ones.
func decodeObject(part string, known []string) (map[string][]byte, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(part)
	if err != nil {
		return nil, errors.New("not base64url without padding")
	}
	m, err := jsonscan.Object(b, known...)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// publicJWK reads the jwk header: a public OKP Ed25519 or EC P-256 key.
// A private member (d, or those of other key types) is refused: the
// client has sent its secret, and the key must not be trusted.
func publicJWK(raw []byte) (jwk.Key, crypto.PublicKey, error) {
	if raw == nil {
		return nil, nil, fmt.Errorf("%w (no jwk header)", ErrMalformed)
	}
	m, err := jsonscan.Object(raw, jwkMembers...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (jwk: %v)", ErrMalformed, err)
	}
	for _, p := range []string{"d", "p", "q", "dp", "dq", "qi", "k", "oth"} {
		if m[p] != nil {
			return nil, nil, fmt.Errorf("%w (the jwk header holds a private key: send only the public key, and make a new key pair)", ErrMalformed)
		}
	}
	key, err := jwk.ParseKey(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (jwk: %v)", ErrMalformed, err)
	}
	var pub crypto.PublicKey
	if err := key.Raw(&pub); err != nil {
		return nil, nil, fmt.Errorf("%w (jwk: %v)", ErrMalformed, err)
	}
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize || ed25519v.SmallOrder(k) {
			return nil, nil, fmt.Errorf("%w (jwk is not a usable Ed25519 public key)", ErrMalformed)
		}
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, nil, fmt.Errorf("%w (jwk: EC keys must be on P-256)", ErrAlg)
		}
		if _, err := k.ECDH(); err != nil {
			return nil, nil, fmt.Errorf("%w (jwk is not a point on P-256)", ErrMalformed)
		}
	default:
		return nil, nil, fmt.Errorf("%w (jwk must be an OKP Ed25519 or EC P-256 key)", ErrAlg)
	}
	return key, pub, nil
}

func keyAlg(pub crypto.PublicKey) algSet {
	switch pub.(type) {
	case ed25519.PublicKey:
		return algEdDSA
	case *ecdsa.PublicKey:
		return algES256
	}
	return 0
}

// verify checks the signature over the signing input. ES256 signatures
// are R||S, 32 bytes each (RFC 7518 §3.4).
func verify(pub crypto.PublicKey, input, sig []byte) bool {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return ed25519v.Verify(k, input, sig)
	case *ecdsa.PublicKey:
		if len(sig) != 64 {
			return false
		}
		h := sha256.Sum256(input)
		r := new(big.Int).SetBytes(sig[:32])
		s := new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(k, h[:], r, s)
	}
	return false
}

// str returns a JSON string value's text, or "" for anything else.
func str(raw []byte) string {
	s, _ := strClaim(raw)
	return s
}

func strClaim(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	return string(jsonscan.Unquote(raw)), true
}

// numericDate reads a JSON number of seconds since the epoch (RFC 7519
// NumericDate, fractions allowed and dropped).
func numericDate(raw []byte) (time.Time, error) {
	if len(raw) == 0 {
		return time.Time{}, errors.New("missing")
	}
	if raw[0] == '"' || raw[0] == '-' || raw[0] == 't' || raw[0] == 'f' || raw[0] == 'n' || raw[0] == '{' || raw[0] == '[' {
		return time.Time{}, errors.New("must be a positive number of seconds")
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f < 0 || f > 1<<40 {
		return time.Time{}, errors.New("must be a number of seconds since 1970")
	}
	return time.Unix(int64(f), 0), nil
}
