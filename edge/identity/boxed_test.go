package identity

import (
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestBoxCache: a credential seen before gets the same boxed values; one
// whose values changed under the same hash gets its own; the cache stays
// within its bound however many credentials pass.
func TestBoxCache(t *testing.T) {
	var c BoxCache
	want := func(b *Boxed, d *vc.Delegation, scopes string) {
		t.Helper()
		if b.AgentDID != any(d.AgentDID) || b.UserDID != any(d.UserDID) || b.Scopes != any(scopes) ||
			b.DelegationID != any(d.DelegationID) || b.Issuer != any(d.Issuer) {
			t.Errorf("boxed %+v, want the values of %+v", b, d)
		}
	}
	a := vc.Delegation{AgentDID: "did:key:z6MkA", UserDID: "did:key:z6MkUser", DelegationID: "urn:uuid:1",
		Issuer: "did:key:z6MkIssuer", Scopes: []string{"tools:read", "echo:execute"}, Hash: [32]byte{1}}
	first := c.Of(&a)
	want(first, &a, "tools:read echo:execute")
	same := a
	same.Scopes = []string{"tools:read", "echo:execute"}
	if again := c.Of(&same); again != first {
		t.Error("the same credential was boxed again")
	}
	other := a
	other.Issuer, other.Scopes = "did:key:z6MkOther", []string{"tools:read"}
	want(c.Of(&other), &other, "tools:read")

	for i := range 3 * maxBoxed {
		d := vc.Delegation{AgentDID: "did:key:z6MkMany", Scopes: []string{"s"}, Hash: [32]byte{byte(i), byte(i >> 8)}}
		want(c.Of(&d), &d, "s")
	}
	if n := len(c.byHash); n > maxBoxed {
		t.Errorf("%d credentials kept, bound %d", n, maxBoxed)
	}
}
