package challenge

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

func testChallengeKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// A flood of anonymous handshakes writes nothing to the store: a store
// bounded at four entries still answers them all, and then takes the one
// marker of a verified answer.
func TestStatelessHandshakeWritesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, WithChallengeKey(testChallengeKey(1)))
	f.store.SetMaxEntries(4)
	a := newAgent(t, didresolver.Ed25519)
	long := "did:web:example.com:" + strings.Repeat("b", 1000)
	for i := range 200 {
		did := long
		if i%2 == 0 {
			did = a.did
		}
		if _, err := f.svc.Issue(ctx, HandshakeParams{AgentDID: did}); err != nil {
			t.Fatalf("handshake %d: %v", i, err)
		}
	}
	if n, m := f.store.Len(), f.store.SingleUses(); n != 0 || m != 0 {
		t.Fatalf("after 200 handshakes the store holds %d records and %d markers, want none", n, m)
	}
	hr := f.issue(t, a)
	p := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
	if _, err := f.svc.Verify(ctx, p); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if n, m := f.store.Len(), f.store.SingleUses(); n != 0 || m != 1 {
		t.Fatalf("after a verify the store holds %d records and %d markers, want 0 and 1", n, m)
	}
}

// The wire form is the stored form's: a 43-character challenge (256 bits)
// and a 32-character nonce, both base64url, new at every handshake.
func TestStatelessChallengeWireForm(t *testing.T) {
	f := newFixture(t, WithChallengeKey(testChallengeKey(1)))
	a := newAgent(t, didresolver.Ed25519)
	seen := map[string]bool{}
	for range 50 {
		hr := f.issue(t, a)
		if len(hr.Challenge) != 43 || len(hr.Nonce) != 32 || hr.ExpiresIn != 300 {
			t.Fatalf("challenge %d chars, nonce %d chars, expiresIn %d; want 43, 32, 300", len(hr.Challenge), len(hr.Nonce), hr.ExpiresIn)
		}
		for _, tok := range []string{hr.Challenge, hr.Nonce} {
			if _, err := base64.RawURLEncoding.DecodeString(tok); err != nil || seen[tok] {
				t.Fatalf("token %q: not base64url, or repeated", tok)
			}
			seen[tok] = true
		}
	}
}

// Every wrong answer is refused without spending the challenge: the
// right answer still verifies after all of them, once.
func TestStatelessVerifyRefuses(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, WithChallengeKey(testChallengeKey(1)))
	other := newFixture(t, WithChallengeKey(testChallengeKey(2)))
	a := newAgent(t, didresolver.Ed25519)
	mallory := newAgent(t, didresolver.Ed25519)
	hr := f.issue(t, a)
	now := TimestampRFC3339(f.clock.Now())
	cred := f.credential(t, a.did)

	withNonce := func(n string) HandshakeResult { h := hr; h.Nonce = n; return h }
	// The same nonce with its expiry moved a day on.
	raw, _ := base64.RawURLEncoding.DecodeString(hr.Nonce)
	raw[1]++
	later := base64.RawURLEncoding.EncodeToString(raw)
	otherRoute := other.issue(t, a)
	// The credential with the last characters of its signature changed.
	forged := append([]byte(nil), cred...)
	copy(forged[len(forged)-5:], `AAAA"`)

	tests := []struct {
		name string
		sc   SignedChallenge
		cred []byte
		want error
	}{
		{"another agent answering", answer(t, mallory, hr, now), f.credential(t, mallory.did), ErrBadProof},
		{"another route's challenge", answer(t, a, otherRoute, now), cred, ErrBadProof},
		{"challenge made up", answer(t, a, HandshakeResult{Challenge: strings.Repeat("A", 43), Nonce: hr.Nonce}, now), cred, ErrBadProof},
		{"expiry moved", answer(t, a, withNonce(later), now), cred, ErrBadProof},
		{"bad signature", func() SignedChallenge {
			sc := answer(t, a, hr, now)
			sc.ProofValue = answer(t, mallory, hr, now).ProofValue
			return sc
		}(), cred, ErrBadProof},
		{"credential of another agent", answer(t, a, hr, now), f.credential(t, mallory.did), ErrUntrustedCredential},
		{"credential with a bad signature", answer(t, a, hr, now), forged, ErrUntrustedCredential},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.Verify(ctx, VerifyParams{SignedChallenge: tc.sc, Credential: tc.cred})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	if m := f.store.SingleUses(); m != 0 {
		t.Fatalf("refused answers left %d markers", m)
	}
	p := VerifyParams{SignedChallenge: answer(t, a, hr, now), Credential: cred}
	if _, err := f.svc.Verify(ctx, p); err != nil {
		t.Fatalf("the right answer after the wrong ones: %v", err)
	}
	if _, err := f.svc.Verify(ctx, p); !errors.Is(err, ErrReplay) || Code(err) != CodeReplay {
		t.Fatalf("second answer = %v, want ErrReplay", err)
	}
}

func TestStatelessExpiry(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, WithChallengeKey(testChallengeKey(1)), WithChallengeTTL(10*time.Second), WithSkew(5*time.Second))
	a := newAgent(t, didresolver.Ed25519)
	hr := f.issue(t, a)
	if hr.ExpiresIn != 10 {
		t.Fatalf("ExpiresIn = %d", hr.ExpiresIn)
	}
	f.clock.Advance(11 * time.Second)
	_, err := f.svc.Verify(ctx, VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)})
	if !errors.Is(err, ErrExpired) || Code(err) != CodeExpired {
		t.Fatalf("Verify after the lifetime = %v, want ErrExpired", err)
	}

	// Answered in time, then again once the marker is gone: the nonce has
	// expired by then, so the second answer is refused all the same.
	hr = f.issue(t, a)
	p := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
	if _, err := f.svc.Verify(ctx, p); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(16 * time.Second)
	p.SignedChallenge = answer(t, a, hr, TimestampRFC3339(f.clock.Now()))
	if _, err := f.svc.Verify(ctx, p); !errors.Is(err, ErrExpired) {
		t.Fatalf("answer after the marker expired = %v, want ErrExpired", err)
	}
}

// A handshake needs no store; the answer does, and fails closed.
func TestStatelessStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a := newAgent(t, didresolver.Ed25519)
	svc, err := New(WithStore(failingStore{}), WithClock(f.clock.Now), WithResolver(f.resolver),
		WithCredentialVerifier(f.verifier), WithChallengeKey(testChallengeKey(1)))
	if err != nil {
		t.Fatal(err)
	}
	hr, err := svc.Issue(ctx, HandshakeParams{AgentDID: a.did})
	if err != nil {
		t.Fatalf("Issue with the store down: %v", err)
	}
	p := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
	if _, err := svc.Verify(ctx, p); !errors.Is(err, ErrStoreUnavailable) || Code(err) != CodeStoreUnavailable {
		t.Fatalf("Verify = %v (code %d), want ErrStoreUnavailable -32000", err, Code(err))
	}
}

// A store without markers keeps a record that no challenge lookup
// accepts.
func TestStatelessWithoutMarkers(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a := newAgent(t, didresolver.Ed25519)
	svc, err := New(WithStore(unsupportedPeekStore{f.store}), WithClock(f.clock.Now), WithResolver(f.resolver),
		WithCredentialVerifier(f.verifier), WithChallengeKey(testChallengeKey(1)))
	if err != nil {
		t.Fatal(err)
	}
	hr, err := svc.Issue(ctx, HandshakeParams{AgentDID: a.did})
	if err != nil {
		t.Fatal(err)
	}
	p := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
	if _, err := svc.Verify(ctx, p); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if _, err := svc.Verify(ctx, p); !errors.Is(err, ErrReplay) {
		t.Fatalf("second Verify = %v, want ErrReplay", err)
	}
	if f.store.Len() != 1 {
		t.Fatalf("store holds %d records, want the answer's one", f.store.Len())
	}
}

// Nonces not of the stateless form (a proxied upstream's, registered) are
// still taken from the store by a service with a key.
func TestStatelessServiceTakesRegisteredNonces(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, WithChallengeKey(testChallengeKey(1)))
	a := newAgent(t, didresolver.Ed25519)
	hr := HandshakeResult{Challenge: "a0b1c2d3e4f5a6b7c8d9", Nonce: "6789012345abcdef", ExpiresIn: 60}
	if err := f.svc.Register(ctx, a.did, hr); err != nil {
		t.Fatal(err)
	}
	p := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
	if _, err := f.svc.Verify(ctx, p); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if _, err := f.svc.Verify(ctx, p); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay = %v", err)
	}
}

func TestChallengeKeyTooShort(t *testing.T) {
	f := newFixture(t)
	if _, err := New(WithStore(f.store), WithResolver(f.resolver), WithCredentialVerifier(f.verifier), WithChallengeKey(make([]byte, 16))); err == nil {
		t.Fatal("a 16-byte challenge key was taken")
	}
}

// Nonces that are not of the stateless form are not read as one.
func TestParseStatelessNonceMalformed(t *testing.T) {
	svc := &Service{key: testChallengeKey(1)}
	good, err := svc.newStatelessNonce(time.Unix(2_000_000_000, 0), testDID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	raw[0] = 2
	otherVersion := base64.RawURLEncoding.EncodeToString(raw)
	for name, n := range map[string]string{
		"empty":         "",
		"short":         good[:31],
		"long":          good + "A",
		"padded":        good[:30] + "==",
		"standard b64":  good[:31] + "+",
		"other version": otherVersion,
		"space":         good[:31] + " ",
		"hex":           strings.Repeat("ab", 16),
	} {
		t.Run(name, func(t *testing.T) {
			if _, ok := parseStatelessNonce(n); ok {
				t.Fatalf("%q read as a stateless nonce", n)
			}
		})
	}
	if n, ok := parseStatelessNonce(good); !ok || n.expires.Unix() != 2_000_000_000 || !svc.issuedTo(n, testDID) || svc.issuedTo(n, testDID+"x") {
		t.Fatalf("good nonce: %v %v", n, ok)
	}
}

func FuzzParseStatelessNonce(f *testing.F) {
	good, _ := (&Service{key: testChallengeKey(1)}).newStatelessNonce(time.Unix(2_000_000_000, 0), testDID)
	for _, s := range []string{"", good, good[:31], "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", strings.Repeat("_", 32)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseStatelessNonce(s)
		if !ok {
			return
		}
		// What is read as one is 24 bytes of base64url, version 1, whose
		// expiry is the one encoded.
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) != nonceBytes || b[0] != statelessVersion {
			t.Fatalf("%q read as a stateless nonce", s)
		}
		if n.expires.Unix() < 0 || n.expires.Unix() > 1<<32 {
			t.Fatalf("expiry %v out of range", n.expires)
		}
	})
}

// A presentation's nonce spends the challenge issued under it, once, by
// the agent it was issued to; the challenge cannot be answered after.
func TestSpendNonce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, WithChallengeKey(testChallengeKey(1)), WithChallengeTTL(10*time.Second))
	a := newAgent(t, didresolver.Ed25519)
	other := newAgent(t, didresolver.Ed25519)
	hr := f.issue(t, a)
	if handled, err := f.svc.SpendNonce(ctx, hr.Nonce, other.did); !handled || !errors.Is(err, ErrBadProof) {
		t.Fatalf("another agent's spend = %v, %v; want handled, ErrBadProof", handled, err)
	}
	if handled, err := f.svc.SpendNonce(ctx, hr.Nonce, a.did); !handled || err != nil {
		t.Fatalf("spend = %v, %v", handled, err)
	}
	if _, err := f.svc.SpendNonce(ctx, hr.Nonce, a.did); !errors.Is(err, ErrReplay) {
		t.Fatalf("second spend = %v, want ErrReplay", err)
	}
	p := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
	if _, err := f.svc.Verify(ctx, p); !errors.Is(err, ErrReplay) {
		t.Fatalf("answer after the spend = %v, want ErrReplay", err)
	}
	late := f.issue(t, a)
	f.clock.Advance(11 * time.Second)
	if _, err := f.svc.SpendNonce(ctx, late.Nonce, a.did); !errors.Is(err, ErrExpired) {
		t.Fatalf("spend after expiry = %v, want ErrExpired", err)
	}
	if handled, _ := f.svc.SpendNonce(ctx, "6789012345abcdef", a.did); handled {
		t.Fatal("a nonce not of the stateless form was handled")
	}
}
