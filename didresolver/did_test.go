package didresolver

import (
	"strings"
	"testing"
)

func TestParseDID(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want DID
		err  error
	}{
		{"ok key", "did:key:z6MkiupQ1QPitvNtmEwCb47mkfCtCoU9A6znu7ECSqyFbVXH", DID{"key", "z6MkiupQ1QPitvNtmEwCb47mkfCtCoU9A6znu7ECSqyFbVXH", ""}, nil},
		{"ok fragment", "did:web:example.com#key-1", DID{"web", "example.com", "key-1"}, nil},
		{"ok web path and port", "did:web:example.com%3A8443:user:alice", DID{"web", "example.com%3A8443:user:alice", ""}, nil},
		{"ok digits in method", "did:3:abc", DID{"3", "abc", ""}, nil},
		{"ok fragment chars", "did:key:z6Mk#a:b@c/d?e%20", DID{"key", "z6Mk", "a:b@c/d?e%20"}, nil},
		{"empty", "", DID{}, ErrInvalidDID},
		{"no scheme", "key:z6Mk", DID{}, ErrInvalidDID},
		{"uppercase scheme", "DID:key:z6Mk", DID{}, ErrInvalidDID},
		{"no method", "did::abc", DID{}, ErrInvalidDID},
		{"no method-specific id", "did:key", DID{}, ErrInvalidDID},
		{"empty method-specific id", "did:key:", DID{}, ErrInvalidDID},
		{"uppercase method", "did:KEY:z6Mk", DID{}, ErrInvalidDID},
		{"method with dash", "did:my-method:abc", DID{}, ErrInvalidDID},
		{"trailing colon", "did:web:example.com:", DID{}, ErrInvalidDID},
		{"space", "did:web:exa mple.com", DID{}, ErrInvalidDID},
		{"bang", "did:key:z6Mk!!", DID{}, ErrInvalidDID},
		{"unicode", "did:web:exämple.com", DID{}, ErrInvalidDID},
		{"bad pct", "did:web:example.com%3", DID{}, ErrInvalidDID},
		{"bad pct hex", "did:web:example.com%zz", DID{}, ErrInvalidDID},
		{"path", "did:web:example.com/path", DID{}, ErrInvalidDID},
		{"query", "did:web:example.com?service=x", DID{}, ErrInvalidDID},
		{"empty fragment", "did:web:example.com#", DID{}, ErrInvalidDID},
		{"bad fragment char", "did:web:example.com#a b", DID{}, ErrInvalidDID},
		{"second hash", "did:web:example.com#a#b", DID{}, ErrInvalidDID},
		{"too long", "did:web:" + strings.Repeat("a", maxDIDLength), DID{}, ErrInvalidDID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDID(tc.in)
			wantErr(t, err, tc.err)
			checkOneSentinel(t, err)
			if got != tc.want {
				t.Fatalf("ParseDID(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestDIDString(t *testing.T) {
	d, err := ParseDID("did:web:example.com:a#k")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.String(); got != "did:web:example.com:a" {
		t.Fatalf("String() = %q", got)
	}
}
