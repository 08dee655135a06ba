// Package assertion is the edge side of MCP-I Level 2 (docs/protocol/mcpi.md#level-2-what-the-upstream-is-told): after
// the edge has verified an agent's delegation credential it tells an
// MCP-I-aware upstream who is calling with an X-Verified-Delegation header,
// a compact JWS signed by the edge's own key, which the upstream verifies
// against the edge's /.well-known/jwks.json (or its did:web document).
//
// The package holds the edge's signing keys (KeySet, shared between replicas
// through a Storage), signs assertions (Signer) and renders the published
// keys (JWKS, DIDDocument). It knows nothing of Caddy or HTTP.
package assertion

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

// Limits and defaults.
const (
	// MaxLifetime is the longest lifetime an assertion may have.
	MaxLifetime = 300 * time.Second
	// DefaultLifetime is the lifetime of an assertion unless configured.
	DefaultLifetime = 60 * time.Second
	// DefaultRetention is how long a retired key stays published after its
	// retirement: the longest assertion lifetime plus a minute for the
	// clock skew verifiers tolerate. Every assertion the key signed has
	// expired (even for a skewed verifier) before it disappears.
	DefaultRetention = MaxLifetime + 60*time.Second
)

// Errors. Every error returned by this package wraps one of these.
var (
	// ErrUnsupportedKey: the key is not Ed25519 or ECDSA P-256.
	ErrUnsupportedKey = errors.New("assertion: unsupported signing key (want Ed25519 or P-256)")
	// ErrInvalidKeySet: a serialised key set could not be decoded.
	ErrInvalidKeySet = errors.New("assertion: invalid key set")
	// ErrLifetime: an assertion lifetime outside (0, MaxLifetime], or longer
	// than the key set's retention.
	ErrLifetime = errors.New("assertion: lifetime out of range")
	// ErrInvalidDelegation: the delegation lacks a field an assertion needs.
	ErrInvalidDelegation = errors.New("assertion: delegation incomplete")
	// ErrDelegationExpired: the delegation expires before the assertion
	// would be issued.
	ErrDelegationExpired = errors.New("assertion: delegation expired")
	// ErrStorage: the shared storage failed.
	ErrStorage = errors.New("assertion: key storage failed")
)

// Key is one signing key of a KeySet. Values are immutable.
type Key struct {
	// Signer is an ed25519.PrivateKey or an *ecdsa.PrivateKey on P-256; nil
	// for a retired key, whose private half is discarded at retirement
	// (only its public half is still needed, for verification).
	Signer crypto.Signer
	// PublicKey is an ed25519.PublicKey or an *ecdsa.PublicKey on P-256.
	PublicKey crypto.PublicKey
	// Alg is the JWS algorithm: "EdDSA" or "ES256".
	Alg string
	// Thumbprint is the RFC 7638 SHA-256 thumbprint of the public key,
	// base64url without padding. Key ids are "<edge DID>#<Thumbprint>".
	Thumbprint string
	// CreatedAt is when the key entered the set.
	CreatedAt time.Time
	// RetiredAt is when a newer key replaced it; zero for the current key.
	RetiredAt time.Time
	// Retention is how long after RetiredAt the key stays published.
	Retention time.Duration
	// ActivatesAt is when a scheduled key (Schedule) starts signing; it
	// is published from its scheduling on. Zero for every other key.
	ActivatesAt time.Time
}

// KeyID returns "<edgeDID>#<thumbprint>".
func (k Key) KeyID(edgeDID string) string { return edgeDID + "#" + k.Thumbprint }

// publishedAt reports whether the key must still be published at now.
func (k Key) publishedAt(now time.Time) bool {
	return k.RetiredAt.IsZero() || now.Before(k.RetiredAt.Add(k.Retention))
}

// newKey checks priv and computes its algorithm and thumbprint.
func newKey(priv crypto.PrivateKey, created time.Time) (Key, error) {
	var signer crypto.Signer
	switch p := priv.(type) {
	case ed25519.PrivateKey:
		if len(p) != ed25519.PrivateKeySize {
			return Key{}, ErrUnsupportedKey
		}
		signer = p
	case *ed25519.PrivateKey:
		if p == nil || len(*p) != ed25519.PrivateKeySize {
			return Key{}, ErrUnsupportedKey
		}
		signer = *p
	case *ecdsa.PrivateKey:
		if p == nil {
			return Key{}, ErrUnsupportedKey
		}
		signer = p
	default:
		return Key{}, ErrUnsupportedKey
	}
	k, err := publicKey(signer.Public(), created)
	if err != nil {
		return Key{}, err
	}
	k.Signer = signer
	return k, nil
}

// publicKey checks pub and computes its algorithm and thumbprint.
func publicKey(pub crypto.PublicKey, created time.Time) (Key, error) {
	k := Key{PublicKey: pub, CreatedAt: created.UTC().Truncate(time.Second)}
	switch p := pub.(type) {
	case ed25519.PublicKey:
		if len(p) != ed25519.PublicKeySize {
			return Key{}, ErrUnsupportedKey
		}
		k.Alg = "EdDSA"
	case *ecdsa.PublicKey:
		if p == nil || p.Curve != elliptic.P256() {
			return Key{}, ErrUnsupportedKey
		}
		k.Alg = "ES256"
	default:
		return Key{}, ErrUnsupportedKey
	}
	j, err := jwk.FromRaw(pub)
	if err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	tp, err := j.Thumbprint(crypto.SHA256)
	if err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	k.Thumbprint = base64.RawURLEncoding.EncodeToString(tp)
	return k, nil
}

// KeySet is the edge's signing key plus the retired keys that must stay
// published until every assertion they signed has expired. It is safe for
// concurrent use.
type KeySet struct {
	mu        sync.RWMutex
	current   Key
	next      *Key  // scheduled to replace current at next.ActivatesAt
	retired   []Key // oldest first
	retention time.Duration
}

// KeySetOption configures NewKeySet.
type KeySetOption func(*KeySet)

// WithRetention sets how long a retired key stays published after Rotate.
// Default DefaultRetention. It must be at least the lifetime of every
// Signer using the set (New checks); values below one second are ignored.
func WithRetention(d time.Duration) KeySetOption {
	return func(ks *KeySet) {
		if d >= time.Second {
			ks.retention = d
		}
	}
}

// NewKeySet returns a set whose current key is priv (ed25519.PrivateKey or
// *ecdsa.PrivateKey on P-256), created at now.
func NewKeySet(priv crypto.PrivateKey, now time.Time, opts ...KeySetOption) (*KeySet, error) {
	k, err := newKey(priv, now)
	if err != nil {
		return nil, err
	}
	ks := &KeySet{current: k, retention: DefaultRetention}
	for _, o := range opts {
		o(ks)
	}
	return ks, nil
}

// Current returns the key new assertions are signed with now
// (CurrentAt(time.Now())).
func (ks *KeySet) Current() Key { return ks.CurrentAt(time.Now()) }

// CurrentAt returns the key new assertions are signed with at now: the
// scheduled key once its activation time has come, else the current one.
func (ks *KeySet) CurrentAt(now time.Time) Key {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	cur, _, _ := ks.settled(now)
	return cur
}

// Retention returns how long a key stays published after it is retired.
func (ks *KeySet) Retention() time.Duration {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	return ks.retention
}

// Published returns every key a verifier may still need at now: the current
// key first, then a scheduled key that does not sign yet, then the retired
// keys still inside their retention window, newest first.
func (ks *KeySet) Published(now time.Time) []Key {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	cur, next, retired := ks.settled(now)
	out := make([]Key, 0, 2+len(retired))
	out = append(out, cur)
	if next != nil {
		out = append(out, *next)
	}
	for i := len(retired) - 1; i >= 0; i-- {
		if retired[i].publishedAt(now) {
			out = append(out, retired[i])
		}
	}
	return out
}

// Rotate makes priv the current key at now. The previous key is retired
// (published for the set's retention), and retired keys whose window has
// passed are dropped. Rotating to the current key is a no-op.
func (ks *KeySet) Rotate(now time.Time, priv crypto.PrivateKey) error {
	k, err := newKey(priv, now)
	if err != nil {
		return err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.settle(now)
	ks.next = nil // a scheduled key that never signed is not needed
	if k.Thumbprint == ks.current.Thumbprint {
		return nil
	}
	old := ks.current
	old.Signer = nil // only the public half is needed from now on
	old.RetiredAt = now.UTC()
	old.Retention = ks.retention
	retired := make([]Key, 0, len(ks.retired)+1)
	for _, r := range ks.retired {
		if r.publishedAt(now) && r.Thumbprint != k.Thumbprint {
			retired = append(retired, r)
		}
	}
	ks.retired = append(retired, old)
	ks.current = k
	return nil
}

// keySetJSON is the stored form of a KeySet.
type keySetJSON struct {
	Version          int       `json:"version"`
	RetentionSeconds int64     `json:"retention_seconds"`
	Current          keyJSON   `json:"current"`
	Next             *keyJSON  `json:"next,omitempty"`
	Retired          []keyJSON `json:"retired,omitempty"`
}

type keyJSON struct {
	JWK              json.RawMessage `json:"jwk"`
	CreatedAt        time.Time       `json:"created_at"`
	RetiredAt        time.Time       `json:"retired_at,omitzero"`
	RetentionSeconds int64           `json:"retention_seconds,omitempty"`
	ActivatesAt      time.Time       `json:"activates_at,omitzero"`
}

// marshalKey writes the private JWK of a current key, the public JWK of a
// retired one.
func marshalKey(k Key) (keyJSON, error) {
	var raw any = k.PublicKey
	if k.Signer != nil {
		raw = k.Signer
	}
	j, err := jwk.FromRaw(raw)
	if err != nil {
		return keyJSON{}, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	if err := j.Set(jwk.KeyIDKey, k.Thumbprint); err != nil {
		return keyJSON{}, err
	}
	if err := j.Set(jwk.AlgorithmKey, k.Alg); err != nil {
		return keyJSON{}, err
	}
	enc, err := json.Marshal(j)
	if err != nil {
		return keyJSON{}, err
	}
	return keyJSON{
		JWK:              enc,
		CreatedAt:        k.CreatedAt,
		RetiredAt:        k.RetiredAt,
		RetentionSeconds: int64(k.Retention / time.Second),
		ActivatesAt:      k.ActivatesAt,
	}, nil
}

// unmarshalKey reads a key; a retired one may be public only (and is kept
// public only even if stored private).
func unmarshalKey(kj keyJSON, retired bool) (Key, error) {
	var (
		k   Key
		err error
	)
	if retired {
		k, err = parsePublicKey(kj.JWK, kj.CreatedAt)
	} else {
		var priv crypto.PrivateKey
		if priv, err = ParsePrivateKey(kj.JWK); err == nil {
			k, err = newKey(priv, kj.CreatedAt)
		}
	}
	if err != nil {
		return Key{}, err
	}
	k.RetiredAt = kj.RetiredAt.UTC()
	k.Retention = time.Duration(kj.RetentionSeconds) * time.Second
	k.ActivatesAt = kj.ActivatesAt.UTC()
	return k, nil
}

// MarshalJSON encodes the whole set: the current key and a scheduled one as
// private JWKs, retired keys as public JWKs with their retirement time and
// retention. The result is a secret: store it like a TLS private key.
func (ks *KeySet) MarshalJSON() ([]byte, error) {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	out := keySetJSON{Version: 1, RetentionSeconds: int64(ks.retention / time.Second)}
	var err error
	if out.Current, err = marshalKey(ks.current); err != nil {
		return nil, err
	}
	if ks.next != nil {
		nj, err := marshalKey(*ks.next)
		if err != nil {
			return nil, err
		}
		out.Next = &nj
	}
	for _, r := range ks.retired {
		rj, err := marshalKey(r)
		if err != nil {
			return nil, err
		}
		out.Retired = append(out.Retired, rj)
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes a set written by MarshalJSON.
func (ks *KeySet) UnmarshalJSON(data []byte) error {
	var in keySetJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidKeySet, err)
	}
	if in.Version != 1 {
		return fmt.Errorf("%w: unknown version %d", ErrInvalidKeySet, in.Version)
	}
	cur, err := unmarshalKey(in.Current, false)
	if err != nil {
		return fmt.Errorf("%w: current key: %w", ErrInvalidKeySet, err)
	}
	if !cur.RetiredAt.IsZero() || !cur.ActivatesAt.IsZero() {
		return fmt.Errorf("%w: current key is retired or scheduled", ErrInvalidKeySet)
	}
	var next *Key
	if in.Next != nil {
		k, err := unmarshalKey(*in.Next, false)
		if err != nil {
			return fmt.Errorf("%w: next key: %w", ErrInvalidKeySet, err)
		}
		if k.ActivatesAt.IsZero() || !k.RetiredAt.IsZero() {
			return fmt.Errorf("%w: next key lacks activates_at", ErrInvalidKeySet)
		}
		next = &k
	}
	retired := make([]Key, 0, len(in.Retired))
	for i, rj := range in.Retired {
		r, err := unmarshalKey(rj, true)
		if err != nil {
			return fmt.Errorf("%w: retired key %d: %w", ErrInvalidKeySet, i, err)
		}
		if r.RetiredAt.IsZero() || r.Retention <= 0 || !r.ActivatesAt.IsZero() {
			return fmt.Errorf("%w: retired key %d lacks retired_at or retention", ErrInvalidKeySet, i)
		}
		retired = append(retired, r)
	}
	retention := time.Duration(in.RetentionSeconds) * time.Second
	if retention < time.Second {
		retention = DefaultRetention
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.current, ks.next, ks.retired, ks.retention = cur, next, retired, retention
	return nil
}

// ParseKeySet decodes a set written by MarshalJSON.
func ParseKeySet(data []byte) (*KeySet, error) {
	ks := new(KeySet)
	if err := ks.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return ks, nil
}

// ParsePrivateKey decodes an Ed25519 or P-256 private key from a JWK (OKP
// Ed25519 or EC P-256, as written by didresolver.MarshalPrivateJWK) or from
// PEM ("PRIVATE KEY" PKCS #8, or "EC PRIVATE KEY" SEC 1). For keys the
// operator keeps in a file.
func ParsePrivateKey(data []byte) (crypto.PrivateKey, error) {
	if block, _ := pem.Decode(data); block != nil {
		var (
			priv any
			err  error
		)
		switch block.Type {
		case "PRIVATE KEY":
			priv, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			priv, err = x509.ParseECPrivateKey(block.Bytes)
		default:
			return nil, fmt.Errorf("%w: PEM block %q", ErrUnsupportedKey, block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
		}
		if _, err := newKey(priv, time.Time{}); err != nil {
			return nil, err
		}
		return priv, nil
	}
	j, err := jwk.ParseKey(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	var priv any
	switch j.(type) {
	case jwk.OKPPrivateKey:
		var p ed25519.PrivateKey
		if err := j.Raw(&p); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
		}
		priv = p
	case jwk.ECDSAPrivateKey:
		var p ecdsa.PrivateKey
		if err := j.Raw(&p); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
		}
		priv = &p
	default:
		return nil, fmt.Errorf("%w: not an OKP or EC private JWK", ErrUnsupportedKey)
	}
	if _, err := newKey(priv, time.Time{}); err != nil {
		return nil, err
	}
	return priv, nil
}

// parsePublicKey reads the public half of an Ed25519 or P-256 JWK.
func parsePublicKey(data []byte, created time.Time) (Key, error) {
	j, err := jwk.ParseKey(data)
	if err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	pj, err := j.PublicKey()
	if err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	var pub any
	if err := pj.Raw(&pub); err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	return publicKey(pub, created)
}
