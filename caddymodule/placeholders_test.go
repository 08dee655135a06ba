package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

func placeholderRequest() (*http.Request, *caddy.Replacer) {
	repl := caddy.NewReplacer()
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	return r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl)), repl
}

func testDelegation(hash byte, agent string, scopes ...string) *vc.Delegation {
	d := &vc.Delegation{AgentDID: agent, UserDID: "did:key:z6MkUser", DelegationID: "urn:uuid:1",
		Issuer: "did:key:z6MkIssuer", Scopes: scopes}
	d.Hash[0] = hash
	return d
}

// The placeholders of each request are its delegation's, whether its
// values were boxed before (same credential), changed under the same
// credential hash, or pushed out by many others.
func TestPlaceholdersPerDelegation(t *testing.T) {
	p := new(placeholders)
	check := func(d *vc.Delegation, wantScopes string) {
		t.Helper()
		r, repl := placeholderRequest()
		p.set(r, d)
		for k, want := range map[string]string{
			"http.auth.user.id": d.AgentDID, "http.auth.user.agent_did": d.AgentDID, "http.auth.user.user_did": d.UserDID,
			"mcpi.agent_did": d.AgentDID, "mcpi.user_did": d.UserDID, "mcpi.scopes": wantScopes,
			"mcpi.delegation_id": d.DelegationID, "mcpi.issuer": d.Issuer,
		} {
			if got, _ := repl.GetString(k); got != want {
				t.Errorf("{%s} = %q, want %q", k, got, want)
			}
		}
	}
	check(testDelegation(1, "did:key:z6MkA", "tools:read", "echo:execute"), "tools:read echo:execute")
	check(testDelegation(1, "did:key:z6MkA", "tools:read", "echo:execute"), "tools:read echo:execute")
	check(testDelegation(2, "did:key:z6MkB", "greet:execute"), "greet:execute")
	// The same hash with other values (a delegation the set must not
	// take for the first one): its own values.
	check(testDelegation(1, "did:key:z6MkC", "tools:read"), "tools:read")
	d := testDelegation(1, "did:key:z6MkC", "tools:read")
	d.Issuer, d.DelegationID, d.UserDID = "did:key:z6MkOther", "urn:uuid:2", "did:key:z6MkUser2"
	check(d, "tools:read")
	for i := range 3 * 256 {
		dd := testDelegation(byte(i), "did:key:z6MkMany", "s")
		dd.Hash[1] = byte(i >> 8)
		check(dd, "s")
	}
	check(testDelegation(2, "did:key:z6MkB", "greet:execute"), "greet:execute")
}

// BenchmarkPlaceholders is the Identity hook on an admitted request whose
// credential was seen before (allocs/op: the replacer's own map growth
// only).
func BenchmarkPlaceholders(b *testing.B) {
	p := new(placeholders)
	d := testDelegation(1, "did:key:z6MkAgent", "tools:read", "echo:execute")
	b.ReportAllocs()
	for b.Loop() {
		r, _ := placeholderRequest()
		p.set(r, d)
	}
}
