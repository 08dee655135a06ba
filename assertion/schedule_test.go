package assertion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

func thumbs(keys []Key) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.Thumbprint)
	}
	return out
}

// TestScheduledKey: a scheduled key is in the JWKS from the start but
// signs only from its activation time; then the old key retires,
// published for the retention from that time.
func TestScheduledKey(t *testing.T) {
	c := newClock(t0)
	s := newTestSigner(t, mustKey(t, genEd25519), c)
	ks := s.KeySet()
	old := ks.CurrentAt(t0).Thumbprint
	if err := ks.Schedule(t0, 20*time.Second, mustKey(t, genP256)); err != nil {
		t.Fatal(err)
	}
	next, ok := ks.Pending(t0)
	if !ok || !next.ActivatesAt.Equal(t0.Add(20*time.Second)) {
		t.Fatalf("pending %+v %v", next, ok)
	}
	if got := thumbs(ks.Published(t0)); !slices.Equal(got, []string{old, next.Thumbprint}) {
		t.Fatalf("published before activation %v, want the old key then the next", got)
	}
	jwks, err := ks.JWKS(edgeDID, t0)
	if err != nil || !bytes.Contains(jwks, []byte(next.Thumbprint)) {
		t.Fatalf("JWKS %s lacks the next key (%v)", jwks, err)
	}

	// Before activation the old key signs.
	c.Set(t0.Add(19 * time.Second))
	tok, err := s.Sign(testDelegation(), upstream)
	if err != nil {
		t.Fatal(err)
	}
	if kid := decodePart(t, tok, 0)["kid"]; kid != edgeDID+"#"+old {
		t.Fatalf("before activation signed with %v", kid)
	}
	// From activation the next one, without a reload; a reused assertion
	// of the old key is not served any more.
	c.Set(t0.Add(20 * time.Second))
	tok, err = s.Sign(testDelegation(), upstream)
	if err != nil {
		t.Fatal(err)
	}
	if kid := decodePart(t, tok, 0)["kid"]; kid != edgeDID+"#"+next.Thumbprint {
		t.Fatalf("after activation signed with %v", kid)
	}
	if _, ok := ks.Pending(c.Now()); ok {
		t.Error("still pending after activation")
	}
	// The old key stays published for the retention from activation.
	end := t0.Add(20*time.Second + ks.Retention())
	if got := thumbs(ks.Published(end.Add(-time.Second))); !slices.Equal(got, []string{next.Thumbprint, old}) {
		t.Errorf("published before the retention ended %v", got)
	}
	if got := thumbs(ks.Published(end)); !slices.Equal(got, []string{next.Thumbprint}) {
		t.Errorf("published after the retention %v", got)
	}
}

// TestScheduledKeyStored: the schedule survives storage (other replicas
// load it), a second schedule replaces a key that never signed, and Rotate
// drops a pending one.
func TestScheduledKeyStored(t *testing.T) {
	ks, err := NewKeySet(mustKey(t, genEd25519), t0)
	if err != nil {
		t.Fatal(err)
	}
	old := ks.CurrentAt(t0).Thumbprint
	if err := ks.Schedule(t0, 30*time.Second, mustKey(t, genEd25519)); err != nil {
		t.Fatal(err)
	}
	first, _ := ks.Pending(t0)
	if err := ks.Schedule(t0.Add(time.Second), 30*time.Second, mustKey(t, genP256)); err != nil {
		t.Fatal(err)
	}
	second, _ := ks.Pending(t0)
	if got := thumbs(ks.Published(t0)); !slices.Equal(got, []string{old, second.Thumbprint}) || first.Thumbprint == second.Thumbprint {
		t.Fatalf("after a second schedule %v", got)
	}
	data, err := json.Marshal(ks)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := ParseKeySet(data)
	if err != nil {
		t.Fatal(err)
	}
	at := t0.Add(31 * time.Second)
	if loaded.CurrentAt(t0).Thumbprint != old || loaded.CurrentAt(at).Thumbprint != second.Thumbprint ||
		loaded.CurrentAt(at).Signer == nil {
		t.Fatal("a loaded set lost its schedule or the next key's private half")
	}
	if err := loaded.Rotate(t0.Add(2*time.Second), mustKey(t, genEd25519)); err != nil {
		t.Fatal(err)
	}
	if _, ok := loaded.Pending(t0.Add(2 * time.Second)); ok {
		t.Error("Rotate kept the pending key")
	}

	for name, bad := range map[string]string{
		"next without activates_at": `{"version":1,"retention_seconds":60,"current":{"jwk":%s,"created_at":"2026-03-01T12:00:00Z"},"next":{"jwk":%s,"created_at":"2026-03-01T12:00:00Z"}}`,
		"current scheduled":         `{"version":1,"retention_seconds":60,"current":{"jwk":%s,"created_at":"2026-03-01T12:00:00Z","activates_at":"2026-03-01T12:00:00Z"},"next":{"jwk":%s,"created_at":"2026-03-01T12:00:00Z","activates_at":"2026-03-01T12:00:00Z"}}`,
	} {
		var raw struct {
			Current, Next struct{ JWK json.RawMessage }
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		doc := []byte(fmt.Sprintf(bad, raw.Current.JWK, raw.Next.JWK))
		if _, err := ParseKeySet(doc); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
