package vc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// TestChain has one row per chain outcome; the chains are minted here.
func TestChain(t *testing.T) {
	f := newFixture(t)
	aud := ForAudience(serverDID)
	stranger := f.addKey(t, didresolver.Ed25519)
	var first *chain3 // the first row's chain, for its check

	type input struct {
		leaf      []byte
		ancestors [][]byte
		opts      []Option
	}
	tests := []struct {
		name   string
		in     func(t *testing.T) input
		want   error
		reason string
		detail string // a part of the message, for the ErrChain rows
		check  func(t *testing.T, d *Delegation)
	}{
		{name: "ok chain of 3 via WithAncestors", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			first = ch
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, check: func(t *testing.T, d *Delegation) {
			want := []string{"urn:uuid:d-root", "urn:uuid:d-mid", "urn:uuid:d-leaf"}
			if !equalStrings(d.Chain, want) {
				t.Errorf("Chain = %q, want %q", d.Chain, want)
			}
			if d.UserDID != f.ed.did || d.AgentDID != f.agent.did || d.Presented {
				t.Errorf("user %q agent %q presented %v", d.UserDID, d.AgentDID, d.Presented)
			}
			// The first agent delegated to, which the leaf agent cannot
			// change by delegating onwards.
			if d.RootAgentDID != first.mid.did || d.RootIssuer != f.ed.did {
				t.Errorf("root agent %q issuer %q, want %q %q", d.RootAgentDID, d.RootIssuer, first.mid.did, f.ed.did)
			}
			if !equalStrings(d.Scopes, []string{"a"}) || d.DelegationID != "d-leaf" {
				t.Errorf("scopes %q delegation %q", d.Scopes, d.DelegationID)
			}
			// The tightest window of the chain: the leaf's end, the leaf's
			// start.
			if !d.ExpiresAt.Equal(fixedNow.Add(time.Hour)) || !d.NotBefore.Equal(fixedNow.Add(-time.Minute)) {
				t.Errorf("window %v .. %v", d.NotBefore, d.ExpiresAt)
			}
		}},
		{name: "ok ancestors in any order, with an unrelated credential", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			other := signCred(t, f.ed, f.delegationVC(f.ed, stranger.did, "d-other", ""), false)
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.middle, other, ch.root, ch.middle}}
		}},
		{name: "ok root names the user, later links repeat it", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				setPath(c, "credentialSubject.delegation.userDid", "did:web:alice.example.com")
			})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, check: func(t *testing.T, d *Delegation) {
			if d.UserDID != "did:web:alice.example.com" {
				t.Errorf("UserDID = %q", d.UserDID)
			}
		}},
		{name: "ok trusted root", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}, opts: []Option{WithTrustedIssuers(f.ed.did)}}
		}},
		{name: "ok leaf with a parent alone, any issuer trusted", in: func(t *testing.T) input {
			return input{leaf: f.chain3(t, nil).leaf}
		}, check: func(t *testing.T, d *Delegation) {
			if len(d.Chain) != 1 || d.UserDID != d.Issuer || d.RootAgentDID != d.AgentDID {
				t.Errorf("Chain %q user %q root agent %q", d.Chain, d.UserDID, d.RootAgentDID)
			}
		}},
		{name: "ok leaf with a parent alone, its issuer trusted directly", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			return input{leaf: ch.leaf, opts: []Option{WithTrustedIssuers(ch.mid2.did)}}
		}},
		{name: "ok truncated chain anchored at a trusted issuer", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.middle}, opts: []Option{WithTrustedIssuers(ch.mid.did)}}
		}, check: func(t *testing.T, d *Delegation) {
			// The top of the chain as given is its root: its issuer (mid)
			// is the user.
			if len(d.Chain) != 2 || d.UserDID == f.ed.did || d.UserDID == "" {
				t.Errorf("Chain %q user %q", d.Chain, d.UserDID)
			}
		}},
		{name: "ok depth exactly the limit", in: func(t *testing.T) input {
			leaf, anc := f.longChain(t, 3)
			return input{leaf: leaf, ancestors: anc, opts: []Option{WithMaxChainDepth(3)}}
		}},
		{name: "ok ten credentials", in: func(t *testing.T) input {
			leaf, anc := f.longChain(t, 10)
			return input{leaf: leaf, ancestors: anc}
		}},

		{name: "chain incomplete", in: func(t *testing.T) input {
			return input{leaf: f.chain3(t, nil).leaf, opts: []Option{WithTrustedIssuers(f.ed.did)}}
		}, want: ErrChainIncomplete, reason: "chain_incomplete"},
		{name: "chain incomplete above the given ancestors", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.middle}, opts: []Option{WithTrustedIssuers(f.ed.did)}}
		}, want: ErrChainIncomplete, reason: "chain_incomplete"},
		{name: "root untrusted", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}, opts: []Option{WithTrustedIssuers(stranger.did)}}
		}, want: ErrUntrustedIssuer, reason: "untrusted_issuer"},
		{name: "trusting an intermediate does not trust a full chain's root", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}, opts: []Option{WithTrustedIssuers(ch.mid.did)}}
		}, want: ErrUntrustedIssuer, reason: "untrusted_issuer"},
		{name: "broken link", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			// The agent signs a credential naming d-mid as parent, but d-mid
			// delegated to mid2, not to the agent.
			forged := signCred(t, f.agent, f.delegationVC(f.agent, f.agent.did, "d-forged", "d-mid", "a"), false)
			return input{leaf: forged, ancestors: [][]byte{ch.root, ch.middle}}
		}, want: ErrChain, reason: "bad_chain", detail: "parent's subject"},
		{name: "scope widening", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 2 {
					setPath(c, "credentialSubject.delegation.scopes", []any{"a", "c"})
					setPath(c, "credentialSubject.delegation.constraints.scopes", []any{"a", "c"})
				}
			})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, want: ErrChain, reason: "bad_chain", detail: "scopes widen"},
		{name: "audience widening: leaf names none", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 2 {
					setPath(c, "credentialSubject.delegation.constraints.audience", del)
				}
			})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, want: ErrChain, reason: "bad_chain", detail: "audience widens"},
		{name: "audience widening: leaf names more", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 2 {
					setPath(c, "credentialSubject.delegation.constraints.audience", []any{serverDID, "did:web:other.example.com"})
				}
			})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, want: ErrChain, reason: "bad_chain", detail: "audience widens"},
		{name: "window not nested: leaf outlives its parent", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 2 {
					c["expirationDate"] = fixedNow.Add(5 * time.Hour).Format(time.RFC3339)
				}
			})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, want: ErrChain, reason: "bad_chain", detail: "window"},
		{name: "window not nested: leaf without an end", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 2 {
					delete(c, "expirationDate")
				}
			})
			// Allowed on its own, it still does not nest.
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}, opts: []Option{WithAllowNoExpiry()}}
		}, want: ErrChain, reason: "bad_chain", detail: "window"},
		{name: "window not nested: leaf starts before its parent", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 2 {
					c["issuanceDate"] = fixedNow.Add(-2 * time.Hour).Format(time.RFC3339)
				}
			})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, want: ErrChain, reason: "bad_chain", detail: "window"},
		{name: "depth exceeded (configured)", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}, opts: []Option{WithMaxChainDepth(2)}}
		}, want: ErrChain, reason: "bad_chain", detail: "deeper"},
		{name: "depth exceeded (default 10)", in: func(t *testing.T) input {
			leaf, anc := f.longChain(t, 11)
			return input{leaf: leaf, ancestors: anc, opts: []Option{WithMaxChainDepth(50)}}
		}, want: ErrChain, reason: "bad_chain", detail: "deeper"},
		{name: "user changes along the chain", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 2 {
					setPath(c, "credentialSubject.delegation.userDid", "did:web:mallory.example.com")
				}
			})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, want: ErrChain, reason: "bad_chain", detail: "userDid"},
		{name: "two ancestors with the parent's id", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			twin := f.delegationVC(ch.mid, ch.mid2.did, "d-mid", "d-root", "a")
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle, signCred(t, ch.mid, twin, false)}}
		}, want: ErrChain, reason: "bad_chain", detail: "share"},
		{name: "ok parentId naming the parent's credential id", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 2 {
					setPath(c, "credentialSubject.delegation.parentId", "urn:uuid:d-mid")
				}
			})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, check: func(t *testing.T, d *Delegation) {
			if len(d.Chain) != 3 {
				t.Errorf("Chain = %q", d.Chain)
			}
		}},
		{name: "cycle", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			loop := f.delegationVC(stranger, ch.mid2.did, "d-mid", "d-leaf", "a")
			return input{leaf: ch.leaf, ancestors: [][]byte{signCred(t, stranger, loop, false), ch.leaf}}
		}, want: ErrChain, reason: "bad_chain", detail: "cycle"},
		{name: "too many ancestors", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			anc := make([][]byte, maxPooled+1)
			for i := range anc {
				anc[i] = ch.root
			}
			return input{leaf: ch.leaf, ancestors: anc}
		}, want: ErrChain, reason: "bad_chain", detail: "too many"},
		{name: "ancestor that does not parse", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, []byte("{not json")}}
		}, want: ErrMalformed, reason: "malformed"},
		{name: "ancestor bad signature", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			m := decodeJSON(t, ch.middle)
			setPath(m, "credentialSubject.delegation.scopes", []any{"a", "b", "c"})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, mustJSON(t, m)}}
		}, want: ErrSignature, reason: "bad_signature"},
		{name: "ancestor expired", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 0 {
					c["expirationDate"] = fixedNow.Add(-time.Hour).Format(time.RFC3339)
				}
			})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, want: ErrExpired, reason: "expired"},
		{name: "ancestor for another audience", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 0 {
					setPath(c, "credentialSubject.delegation.constraints.audience", "did:web:other.example.com")
				}
			})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, want: ErrAudience, reason: "wrong_audience"},
		{name: "ancestor not a delegation", in: func(t *testing.T) input {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 0 {
					c["type"] = []any{"VerifiableCredential"}
				}
			})
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.root, ch.middle}}
		}, want: ErrType, reason: "wrong_type"},
		{name: "presentation as an ancestor", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			return input{leaf: ch.leaf, ancestors: [][]byte{vpJWT(t, f.agent, [][]byte{ch.root}, nil), ch.middle}}
		}, want: ErrMalformed, reason: "malformed"},
	}

	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in(t)
			d, err := f.verifier(in.opts...).Verify(ctx, in.leaf, aud, WithAncestors(in.ancestors...))
			expectOutcome(t, d, err, tc.want, tc.reason, tc.detail, tc.check)
		})
	}
}

// longChain is a chain of n credentials, each issued by the previous
// subject, ending at the agent; it returns the leaf and the ancestors.
func (f *fixture) longChain(t *testing.T, n int) ([]byte, [][]byte) {
	t.Helper()
	keys := make([]testKey, n+1)
	keys[0] = f.ed
	for i := 1; i < n; i++ {
		keys[i] = f.addKey(t, didresolver.Ed25519)
	}
	keys[n] = f.agent
	var creds [][]byte
	for i := 0; i < n; i++ {
		parent := ""
		if i > 0 {
			parent = fmt.Sprintf("d-%d", i-1)
		}
		c := f.delegationVC(keys[i], keys[i+1].did, fmt.Sprintf("d-%d", i), parent, "a")
		creds = append(creds, signCred(t, keys[i], c, false))
	}
	return creds[n-1], creds[:n-1]
}

// TestChainBackwardCompatible: a credential naming a parent verified
// alone before chains were checked, and still does when any issuer is
// trusted; ancestors given for a credential without a parent are ignored.
func TestChainBackwardCompatible(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ch := f.chain3(t, nil)
	root := signCred(t, f.ed, f.delegationVC(f.ed, f.agent.did, "d-solo", "", "a"), false)
	v := f.verifier()
	d, err := v.Verify(ctx, root, ForAudience(serverDID), WithAncestors([]byte("ignored: never parsed")))
	if err != nil || len(d.Chain) != 1 || d.Chain[0] != "urn:uuid:d-solo" {
		t.Fatalf("root with ignored ancestors: %v, %+v", err, d)
	}
	if _, err := v.Verify(ctx, ch.leaf, ForAudience(serverDID)); err != nil {
		t.Fatalf("leaf alone: %v", err)
	}
}
