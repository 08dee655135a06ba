package vc

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"testing"
	"time"
)

// TestDelegationConstraints: the leaf's constraints object reaches the
// Delegation whole, the issuer's own members included, on the VC-JWT and
// the JSON credential paths alike.
func TestDelegationConstraints(t *testing.T) {
	f := newFixture(t)
	tmpl := Template{
		AgentDID: f.agent.did, Audience: []string{serverDID}, Scopes: []string{"payments:execute"},
		ExpiresAt:   time.Now().Add(time.Hour).Truncate(time.Second),
		Constraints: map[string]any{"maxAmount": 500, "region": "eu", "scopes": []string{"ignored"}},
	}
	jwt, err := IssueJWT(f.ed.priv, f.ed.kid, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	js, err := IssueJSON(f.ed.priv.(ed25519.PrivateKey), f.ed.kid, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(f.res) // IssueJWT stamps iat with the real clock
	for name, raw := range map[string][]byte{"JWT": []byte(jwt), "JSON": js} {
		d, err := v.Verify(context.Background(), raw, ForAudience(serverDID))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(d.Constraints), &got); err != nil {
			t.Fatalf("%s: Constraints %q: %v", name, d.Constraints, err)
		}
		if got["maxAmount"] != float64(500) || got["region"] != "eu" || got["notAfter"] != float64(tmpl.ExpiresAt.Unix()) {
			t.Errorf("%s: Constraints %s", name, d.Constraints)
		}
		if s, _ := got["scopes"].([]any); len(s) != 1 || s[0] != "payments:execute" {
			t.Errorf("%s: the template's scopes must win over Constraints': %s", name, d.Constraints)
		}
	}

	// Without a constraints object: empty. With the website form, the
	// subject's own.
	for name, tc := range map[string]struct {
		claims func(map[string]any)
		want   string
	}{
		"none": {func(c map[string]any) {
			delete(c["vc"].(map[string]any)["credentialSubject"].(map[string]any)["delegation"].(map[string]any), "constraints")
		}, ""},
		"subject form": {func(c map[string]any) {
			sub := c["vc"].(map[string]any)["credentialSubject"].(map[string]any)
			delete(sub["delegation"].(map[string]any), "constraints")
			sub["constraints"] = json.RawMessage(`{"maxAmount": 7}`)
		}, `{"maxAmount":7}`},
	} {
		claims := f.vc11Claims(f.ed)
		tc.claims(claims)
		d, err := NewVerifier(f.res, WithClock(func() time.Time { return fixedNow })).Verify(context.Background(), mint(t, f.ed.priv, header("EdDSA", f.ed.kid), claims))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d.Constraints != tc.want {
			t.Errorf("%s: Constraints %q, want %q", name, d.Constraints, tc.want)
		}
	}
}
