package vc

import "testing"

// BenchmarkCloneDelegation: what a cache hit pays for its own copy.
func BenchmarkCloneDelegation(b *testing.B) {
	d := &Delegation{
		AgentDID: "did:key:z6MkAgent", UserDID: "did:key:z6MkUser", Issuer: "did:key:z6MkIssuer",
		Scopes:   []string{"greeting:read", "greeting:write", "files:read"},
		Audience: []string{serverDID},
		Chain:    []string{"urn:uuid:3f0c0000-0000-4000-8000-000000000001"},
	}
	b.ReportAllocs()
	for b.Loop() {
		cloneSink = d.Clone()
	}
}

var cloneSink *Delegation
