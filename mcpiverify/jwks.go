package mcpiverify

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
)

// verKey is a verification key from the edge's JWKS.
type verKey struct {
	alg string // EdDSA or ES256
	key any    // ed25519.PublicKey or *ecdsa.PublicKey (P-256)
}

// keyCache is one fetched JWKS. Immutable once stored.
type keyCache struct {
	keys      map[string]verKey
	fetchedAt time.Time
}

// lookupKey returns the key with id kid. When the cached set is older than
// the TTL, or lacks kid, the JWKS is fetched again (at most once per
// refetch interval outside the TTL schedule).
func (v *Verifier) lookupKey(ctx context.Context, kid string) (verKey, error) {
	kc := v.keys.Load()
	if kc != nil && v.now().Before(kc.fetchedAt.Add(v.ttl)) {
		if k, ok := kc.keys[kid]; ok {
			return k, nil
		}
	}
	kc, err := v.refresh(ctx, kc)
	if err != nil {
		return verKey{}, err
	}
	if k, ok := kc.keys[kid]; ok {
		return k, nil
	}
	return verKey{}, ErrUnknownKey
}

// refresh fetches the JWKS unless another caller replaced seen meanwhile or
// the rate limit forbids it. It returns the keys to use.
func (v *Verifier) refresh(ctx context.Context, seen *keyCache) (*keyCache, error) {
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	cur := v.keys.Load()
	if cur != seen && cur != nil {
		return cur, nil // refreshed while we waited for the lock
	}
	now := v.now()
	usable := cur != nil && now.Before(cur.fetchedAt.Add(2*v.ttl))
	if !v.lastAttempt.IsZero() && now.Sub(v.lastAttempt) < v.refetchInterval {
		if usable {
			return cur, nil
		}
		if v.lastErr != nil {
			return nil, v.lastErr
		}
		return nil, ErrJWKSUnavailable
	}
	v.lastAttempt = now
	keys, err := v.fetch(ctx)
	if err != nil {
		v.lastErr = err
		if usable {
			return cur, nil
		}
		return nil, err
	}
	v.lastErr = nil
	kc := &keyCache{keys: keys, fetchedAt: now}
	v.keys.Store(kc)
	return kc, nil
}

// fetch downloads and parses the JWKS, keeping the Ed25519 and P-256
// signature keys that have a kid.
func (v *Verifier) fetch(ctx context.Context) (map[string]verKey, error) {
	// The fetch serves every waiting request: do not let one caller's
	// cancellation abort it, only the timeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.jwksURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrJWKSUnavailable, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrJWKSUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: HTTP %d", ErrJWKSUnavailable, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, v.maxJWKSSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrJWKSUnavailable, err)
	}
	if int64(len(body)) > v.maxJWKSSize {
		return nil, fmt.Errorf("%w: JWKS larger than %d bytes", ErrJWKSUnavailable, v.maxJWKSSize)
	}
	return parseJWKS(body)
}

// parseJWKS keeps the usable keys of a JWKS document.
func parseJWKS(body []byte) (map[string]verKey, error) {
	set, err := jwk.Parse(body)
	if err != nil {
		return nil, fmt.Errorf("%w: invalid JWKS: %v", ErrJWKSUnavailable, err)
	}
	keys := make(map[string]verKey, set.Len())
	for i := range set.Len() {
		k, _ := set.Key(i)
		kid := k.KeyID()
		if kid == "" || (k.KeyUsage() != "" && k.KeyUsage() != "sig") {
			continue
		}
		if _, dup := keys[kid]; dup {
			continue
		}
		vk, ok := usableKey(k)
		if !ok {
			continue
		}
		keys[kid] = vk
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: JWKS has no usable key", ErrJWKSUnavailable)
	}
	return keys, nil
}

// usableKey converts an Ed25519 or P-256 JWK whose alg (if any) fits its
// type.
func usableKey(k jwk.Key) (verKey, bool) {
	pub, err := k.PublicKey()
	if err != nil {
		return verKey{}, false
	}
	var raw any
	if err := pub.Raw(&raw); err != nil {
		return verKey{}, false
	}
	var vk verKey
	switch p := raw.(type) {
	case ed25519.PublicKey:
		if len(p) != ed25519.PublicKeySize {
			return vk, false
		}
		vk = verKey{alg: jwa.EdDSA.String(), key: p}
	case *ecdsa.PublicKey:
		if p.Curve != elliptic.P256() {
			return vk, false
		}
		vk = verKey{alg: jwa.ES256.String(), key: p}
	default:
		return vk, false
	}
	if a := k.Algorithm().String(); a != "" && a != vk.alg {
		return vk, false
	}
	return vk, true
}
