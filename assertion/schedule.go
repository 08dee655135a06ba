package assertion

import (
	"crypto"
	"slices"
	"time"
)

// A rotation that switches keys at once fails every verifier that has not
// fetched the JWKS since: it meets a kid it does not know, and verifiers
// limit how often they refetch. Schedule publishes the next key first and
// lets it sign only after a delay, by which time every verifier that
// refetches at most once per that delay knows it.

// Schedule makes priv the key that signs from now+delay on; until then it
// is published beside the current key. A key scheduled before and not yet
// signing is replaced (it never signed anything). At the activation time
// the current key retires, published for the set's retention from then.
// A delay of zero or less is Rotate.
func (ks *KeySet) Schedule(now time.Time, delay time.Duration, priv crypto.PrivateKey) error {
	if delay <= 0 {
		return ks.Rotate(now, priv)
	}
	k, err := newKey(priv, now)
	if err != nil {
		return err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.settle(now)
	if k.Thumbprint == ks.current.Thumbprint {
		ks.next = nil
		return nil
	}
	k.ActivatesAt = now.UTC().Add(delay)
	ks.next = &k
	return nil
}

// Pending returns the scheduled key that does not sign yet at now.
func (ks *KeySet) Pending(now time.Time) (Key, bool) {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	_, next, _ := ks.settled(now)
	if next == nil {
		return Key{}, false
	}
	return *next, true
}

// settled is the set as it stands at now: once the scheduled key's time
// has come it is the current key and the old one is retired (at the
// activation time). It does not change ks; callers hold ks.mu.
func (ks *KeySet) settled(now time.Time) (cur Key, next *Key, retired []Key) {
	if ks.next == nil || now.Before(ks.next.ActivatesAt) {
		return ks.current, ks.next, ks.retired
	}
	old := ks.current
	old.Signer = nil
	old.RetiredAt = ks.next.ActivatesAt
	old.Retention = ks.retention
	cur = *ks.next
	cur.ActivatesAt = time.Time{}
	return cur, nil, append(slices.Clip(ks.retired), old)
}

// settle applies settled to ks; callers hold ks.mu for writing.
func (ks *KeySet) settle(now time.Time) {
	ks.current, ks.next, ks.retired = ks.settled(now)
}
