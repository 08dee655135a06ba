package challenge

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

func TestVerify(t *testing.T) {
	ctx := context.Background()
	// ok runs a full handshake for kt and returns the fixture, the agent
	// and params ready to verify.
	type setup func(t *testing.T, f *fixture) VerifyParams
	basic := func(kt didresolver.KeyType) setup {
		return func(t *testing.T, f *fixture) VerifyParams {
			a := newAgent(t, kt)
			hr := f.issue(t, a)
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did, "tool:execute")}
		}
	}
	tests := []struct {
		name    string
		opts    []Option
		setup   setup
		wantErr error
		code    int
	}{
		{name: "ok ed25519", setup: basic(didresolver.Ed25519)},
		{name: "ok p256", setup: basic(didresolver.P256)},
		{name: "ok secp256k1", setup: basic(didresolver.Secp256k1)},
		{name: "ok base64url proofValue", setup: func(t *testing.T, f *fixture) VerifyParams {
			p := basic(didresolver.Secp256k1)(t, f)
			sig, err := base58.Decode(p.SignedChallenge.ProofValue[1:])
			if err != nil {
				t.Fatal(err)
			}
			p.SignedChallenge.ProofValue = base64.RawURLEncoding.EncodeToString(sig)
			return p
		}},
		{name: "ok multibase base64url proofValue", setup: func(t *testing.T, f *fixture) VerifyParams {
			p := basic(didresolver.Ed25519)(t, f)
			sig, _ := base58.Decode(p.SignedChallenge.ProofValue[1:])
			p.SignedChallenge.ProofValue = "u" + base64.RawURLEncoding.EncodeToString(sig)
			return p
		}},
		{name: "ok unix ms timestamp", setup: func(t *testing.T, f *fixture) VerifyParams {
			a := newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampUnixMilli(f.clock.Now())), Credential: f.credential(t, a.did)}
		}},
		{name: "ok unix seconds timestamp", setup: func(t *testing.T, f *fixture) VerifyParams {
			a := newAgent(t, didresolver.P256)
			hr := f.issue(t, a)
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampUnix(f.clock.Now())), Credential: f.credential(t, a.did)}
		}},
		{name: "ok JSON credential object", setup: func(t *testing.T, f *fixture) VerifyParams {
			a := newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			cred, err := vc.IssueJSON(f.user.priv.(ed25519.PrivateKey), f.user.kid, vc.Template{AgentDID: a.did, Scopes: []string{"s"}, ExpiresAt: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatalf("IssueJSON: %v", err)
			}
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: cred}
		}},
		{name: "ok did:web agent, second authentication key signs", setup: func(t *testing.T, f *fixture) VerifyParams {
			k1, _ := didresolver.GenerateKey(didresolver.P256)
			k2, _ := didresolver.GenerateKey(didresolver.Ed25519)
			did := "did:web:agent.example"
			f.resolver.addWebDoc(t, did, k1, k2)
			a := agent{priv: k2, did: did}
			hr := f.issue(t, a)
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, did)}
		}},
		{name: "expired challenge", wantErr: ErrExpired, code: -32001, setup: func(t *testing.T, f *fixture) VerifyParams {
			a := newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			f.clock.Advance(DefaultChallengeTTL + time.Second)
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
		}},
		{name: "expired long ago is unknown", wantErr: ErrReplay, code: -32003, setup: func(t *testing.T, f *fixture) VerifyParams {
			a := newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			f.clock.Advance(DefaultChallengeTTL + DefaultSkew + time.Second)
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
		}},
		{name: "unknown nonce", wantErr: ErrReplay, code: -32003, setup: func(t *testing.T, f *fixture) VerifyParams {
			a := newAgent(t, didresolver.Ed25519)
			hr := HandshakeResult{Challenge: "c2VlZA", Nonce: "bm90LWlzc3VlZA"}
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
		}},
		{name: "wrong DID: signed by another agent's key", wantErr: ErrBadProof, code: -32002, setup: func(t *testing.T, f *fixture) VerifyParams {
			a, b := newAgent(t, didresolver.Ed25519), newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			sc := answer(t, b, hr, TimestampRFC3339(f.clock.Now()))
			sc.AgentDID = a.did // claims a, signature by b's key over the same bytes
			sc, _ = SignChallenge(b.priv, sc)
			return VerifyParams{SignedChallenge: sc, Credential: f.credential(t, a.did)}
		}},
		{name: "wrong key: not in the did:web document", wantErr: ErrBadProof, code: -32002, setup: func(t *testing.T, f *fixture) VerifyParams {
			k1, _ := didresolver.GenerateKey(didresolver.Ed25519)
			other, _ := didresolver.GenerateKey(didresolver.Ed25519)
			did := "did:web:agent.example"
			f.resolver.addWebDoc(t, did, k1)
			hr := f.issue(t, agent{did: did})
			return VerifyParams{SignedChallenge: answer(t, agent{priv: other, did: did}, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, did)}
		}},
		{name: "challenge issued to another agent", wantErr: ErrBadProof, code: -32002, setup: func(t *testing.T, f *fixture) VerifyParams {
			a, b := newAgent(t, didresolver.Ed25519), newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			return VerifyParams{SignedChallenge: answer(t, b, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, b.did)}
		}},
		{name: "challenge does not match nonce", wantErr: ErrBadProof, code: -32002, setup: func(t *testing.T, f *fixture) VerifyParams {
			a := newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			hr.Challenge = "Zm9yZ2Vk"
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
		}},
		{name: "bad encoding", wantErr: ErrBadProof, code: -32002, setup: func(t *testing.T, f *fixture) VerifyParams {
			p := basic(didresolver.Ed25519)(t, f)
			p.SignedChallenge.ProofValue = "z0OIl!!"
			return p
		}},
		{name: "short signature", wantErr: ErrBadProof, code: -32002, setup: func(t *testing.T, f *fixture) VerifyParams {
			p := basic(didresolver.Ed25519)(t, f)
			p.SignedChallenge.ProofValue = "z" + base58.Encode(make([]byte, 63))
			return p
		}},
		{name: "tampered after signing", wantErr: ErrBadProof, code: -32002, setup: func(t *testing.T, f *fixture) VerifyParams {
			p := basic(didresolver.P256)(t, f)
			p.SignedChallenge.Timestamp = TimestampRFC3339(f.clock.Now().Add(time.Second))
			return p
		}},
		{name: "timestamp too old", wantErr: ErrExpired, code: -32001, setup: func(t *testing.T, f *fixture) VerifyParams {
			a := newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now().Add(-DefaultSkew-time.Second))), Credential: f.credential(t, a.did)}
		}},
		{name: "timestamp in the future", wantErr: ErrBadProof, code: -32002, setup: func(t *testing.T, f *fixture) VerifyParams {
			a := newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now().Add(DefaultSkew+time.Second))), Credential: f.credential(t, a.did)}
		}},
		{name: "timestamp within skew", setup: func(t *testing.T, f *fixture) VerifyParams {
			a := newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now().Add(-DefaultSkew+time.Second))), Credential: f.credential(t, a.did)}
		}},
		{name: "credential for another agent", wantErr: ErrUntrustedCredential, code: -32004, setup: func(t *testing.T, f *fixture) VerifyParams {
			a, b := newAgent(t, didresolver.Ed25519), newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, b.did)}
		}},
		{name: "credential forged", wantErr: ErrUntrustedCredential, code: -32004, setup: func(t *testing.T, f *fixture) VerifyParams {
			p := basic(didresolver.Ed25519)(t, f)
			var jwt string
			_ = json.Unmarshal(p.Credential, &jwt)
			jwt = jwt[:len(jwt)-4] + "AAAA"
			p.Credential, _ = json.Marshal(jwt)
			return p
		}},
		{name: "credential lacks scope required by the service", wantErr: ErrUntrustedCredential, code: -32004,
			opts: []Option{WithCredentialChecks(vc.RequireScopes("admin:execute"))}, setup: basic(didresolver.Ed25519)},
		{name: "key type not accepted", wantErr: ErrBadProof, code: -32002,
			opts: []Option{WithSupportedMethods("Ed25519")}, setup: func(t *testing.T, f *fixture) VerifyParams {
				a := newAgent(t, didresolver.P256)
				hr, err := f.svc.Issue(ctx, HandshakeParams{AgentDID: a.did})
				if err != nil {
					t.Fatal(err)
				}
				return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
			}},
		{name: "unresolvable agent DID", wantErr: ErrBadProof, code: -32002, setup: func(t *testing.T, f *fixture) VerifyParams {
			k, _ := didresolver.GenerateKey(didresolver.Ed25519)
			a := agent{priv: k, did: "did:web:unknown.example"}
			hr := f.issue(t, a)
			return VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
		}},
		{name: "malformed params", wantErr: ErrInvalidParams, code: -32602, setup: func(t *testing.T, f *fixture) VerifyParams {
			p := basic(didresolver.Ed25519)(t, f)
			p.SignedChallenge.AgentDID = "not a did"
			return p
		}},
		{name: "missing credential", wantErr: ErrInvalidParams, code: -32602, setup: func(t *testing.T, f *fixture) VerifyParams {
			p := basic(didresolver.Ed25519)(t, f)
			p.Credential = nil
			return p
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts...)
			p := tt.setup(t, f)
			// Round-trip through the wire form, as a real request would.
			wire, err := json.Marshal(p)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if parsed, err := ParseVerifyParams(wire); err == nil {
				p = *parsed
			} else if tt.wantErr == nil {
				t.Fatalf("ParseVerifyParams: %v", err)
			}
			v, err := f.svc.Verify(ctx, p)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Verify error = %v, want %v", err, tt.wantErr)
				}
				if got := Code(err); got != tt.code {
					t.Fatalf("Code = %d, want %d", got, tt.code)
				}
				if v != nil {
					t.Fatalf("Verified returned with error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if v.AgentDID != p.SignedChallenge.AgentDID || v.UserDID != f.user.did {
				t.Fatalf("Verified = %+v", v)
			}
			if v.KeyID == "" || !strings.HasPrefix(v.KeyID, v.AgentDID+"#") {
				t.Fatalf("KeyID = %q", v.KeyID)
			}
			if v.Delegation == nil || v.ExpiresAt.IsZero() || v.SessionID != "" {
				t.Fatalf("Verified = %+v", v)
			}
		})
	}
}

func TestReplay(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a := newAgent(t, didresolver.Ed25519)
	hr := f.issue(t, a)
	p := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
	if _, err := f.svc.Verify(ctx, p); err != nil {
		t.Fatalf("first Verify: %v", err)
	}
	_, err := f.svc.Verify(ctx, p)
	if !errors.Is(err, ErrReplay) || Code(err) != -32003 {
		t.Fatalf("second Verify = %v (code %d), want ErrReplay -32003", err, Code(err))
	}
}

func TestConcurrentVerifyOnlyOneWins(t *testing.T) {
	for name, opts := range map[string][]Option{
		"stored":    nil,
		"stateless": {WithChallengeKey(testChallengeKey(1))},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, opts...)
			a := newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			p := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
			if ok, replay := verifyConcurrently(t, f.svc, p, 16); ok != 1 || replay != 15 {
				t.Fatalf("ok=%d replay=%d, want 1 and 15", ok, replay)
			}
		})
	}
}

func TestBadSignatureDoesNotConsumeNonce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a := newAgent(t, didresolver.Ed25519)
	attacker := newAgent(t, didresolver.Ed25519)
	hr := f.issue(t, a)
	cred := f.credential(t, a.did)

	good := answer(t, a, hr, TimestampRFC3339(f.clock.Now()))
	// The attacker knows the nonce and challenge but not a's key.
	forged := good
	forged.ProofValue = answer(t, attacker, hr, good.Timestamp).ProofValue
	garbage := good
	garbage.ProofValue = "z" + base58.Encode(make([]byte, 64))
	for _, bad := range []SignedChallenge{forged, garbage} {
		_, err := f.svc.Verify(ctx, VerifyParams{SignedChallenge: bad, Credential: cred})
		if !errors.Is(err, ErrBadProof) {
			t.Fatalf("bad answer: %v, want ErrBadProof", err)
		}
	}
	if f.store.Len() != 1 {
		t.Fatalf("store holds %d records, want the challenge still there", f.store.Len())
	}
	if _, err := f.svc.Verify(ctx, VerifyParams{SignedChallenge: good, Credential: cred}); err != nil {
		t.Fatalf("correct answer after bad ones: %v", err)
	}
}

// TestWrongAnswerDoesNotConsumeNonce: with a store that can peek, an
// answer that is not the agent's own answer to the challenge issued under
// the nonce is refused before anything is consumed, however validly it is
// signed: nobody who merely learned a nonce can burn it.
func TestWrongAnswerDoesNotConsumeNonce(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		bad  func(f *fixture, a, mallory agent, hr HandshakeResult) SignedChallenge
		want error
	}{
		{"answer by another agent, as itself", func(f *fixture, _, mallory agent, hr HandshakeResult) SignedChallenge {
			return answer(t, mallory, hr, TimestampRFC3339(f.clock.Now()))
		}, ErrBadProof},
		{"another challenge under the nonce, validly signed", func(f *fixture, _, mallory agent, hr HandshakeResult) SignedChallenge {
			return answer(t, mallory, HandshakeResult{Challenge: "Zm9yZ2Vk", Nonce: hr.Nonce}, TimestampRFC3339(f.clock.Now()))
		}, ErrBadProof},
		{"the agent's DID, another challenge, mallory's key", func(f *fixture, a, mallory agent, hr HandshakeResult) SignedChallenge {
			sc, _ := SignChallenge(mallory.priv, SignedChallenge{Challenge: "Zm9yZ2Vk", Nonce: hr.Nonce, AgentDID: a.did, Timestamp: TimestampRFC3339(f.clock.Now())})
			return sc
		}, ErrBadProof},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			a, mallory := newAgent(t, didresolver.Ed25519), newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			_, err := f.svc.Verify(ctx, VerifyParams{SignedChallenge: tc.bad(f, a, mallory, hr), Credential: f.credential(t, mallory.did)})
			if !errors.Is(err, tc.want) || Code(err) != Code(tc.want) {
				t.Fatalf("bad answer: %v, want %v", err, tc.want)
			}
			if f.store.Len() != 1 {
				t.Fatalf("store holds %d records, want the challenge still there", f.store.Len())
			}
			good := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
			if _, err := f.svc.Verify(ctx, good); err != nil {
				t.Fatalf("the agent's own answer after a wrong one: %v", err)
			}
		})
	}
}

// noPeekStore hides the Peek of the store it wraps.
type noPeekStore struct{ NonceStore }

// unsupportedPeekStore has a Peek that is not supported (a wrapper over a
// store without one).
type unsupportedPeekStore struct{ NonceStore }

func (unsupportedPeekStore) Peek(context.Context, string) (Record, error) {
	return Record{}, fmt.Errorf("wrapped store: %w", errors.ErrUnsupported)
}

// TestVerifyWithoutPeek: a store that cannot peek is consumed right after
// the signature check, as before Peeker existed: an answer validly signed
// by another agent spends the nonce (and is refused).
func TestVerifyWithoutPeek(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		wrap func(NonceStore) NonceStore
	}{
		{"no Peek", func(s NonceStore) NonceStore { return noPeekStore{s} }},
		{"Peek unsupported", func(s NonceStore) NonceStore { return unsupportedPeekStore{s} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			svc, err := New(WithStore(tc.wrap(f.store)), WithClock(f.clock.Now), WithResolver(f.resolver), WithCredentialVerifier(f.verifier))
			if err != nil {
				t.Fatal(err)
			}
			f.svc = svc
			a, mallory := newAgent(t, didresolver.Ed25519), newAgent(t, didresolver.Ed25519)
			hr := f.issue(t, a)
			good := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}

			// A bad signature still consumes nothing.
			garbage := good
			garbage.SignedChallenge.ProofValue = "z" + base58.Encode(make([]byte, 64))
			if _, err := svc.Verify(ctx, garbage); !errors.Is(err, ErrBadProof) || f.store.Len() != 1 {
				t.Fatalf("garbage signature: %v, %d records", err, f.store.Len())
			}
			burn := VerifyParams{SignedChallenge: answer(t, mallory, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, mallory.did)}
			if _, err := svc.Verify(ctx, burn); !errors.Is(err, ErrBadProof) {
				t.Fatalf("answer by another agent: %v, want ErrBadProof", err)
			}
			if _, err := svc.Verify(ctx, good); !errors.Is(err, ErrReplay) {
				t.Fatalf("without Peek the other agent's answer spends the nonce; the agent's own answer got %v", err)
			}
		})
	}
}

// swapStore peeks one record and consumes another, as if the nonce had
// been consumed and stored again between the two.
type swapStore struct {
	*MemoryStore
	consumed Record
}

func (s *swapStore) Consume(ctx context.Context, nonce string) (Record, error) {
	if _, err := s.MemoryStore.Consume(ctx, nonce); err != nil {
		return Record{}, err
	}
	return s.consumed, nil
}

func TestVerifyRecordReplacedIsReplay(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a := newAgent(t, didresolver.Ed25519)
	hr := f.issue(t, a)
	rec, err := f.store.Peek(ctx, hr.Nonce)
	if err != nil {
		t.Fatal(err)
	}
	rec.IssuedAt = rec.IssuedAt.Add(time.Second) // same challenge and agent, another record
	svc, err := New(WithStore(&swapStore{f.store, rec}), WithClock(f.clock.Now), WithResolver(f.resolver), WithCredentialVerifier(f.verifier))
	if err != nil {
		t.Fatal(err)
	}
	p := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)}
	if _, err := svc.Verify(ctx, p); !errors.Is(err, ErrReplay) || Code(err) != CodeReplay {
		t.Fatalf("Verify with a record replaced between peek and consume = %v, want ErrReplay", err)
	}
}

type fakeSessions struct {
	gotAgent string
	gotDeleg *vc.Delegation
	err      error
}

func (s *fakeSessions) IssueSession(_ context.Context, d *vc.Delegation, agentDID string) (string, time.Time, error) {
	s.gotAgent, s.gotDeleg = agentDID, d
	return "sess-1", time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), s.err
}

func TestVerifyIssuesSession(t *testing.T) {
	ctx := context.Background()
	sessions := &fakeSessions{}
	f := newFixture(t, WithSessionIssuer(sessions))
	a := newAgent(t, didresolver.Secp256k1)
	hr := f.issue(t, a)
	v, err := f.svc.Verify(ctx, VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did, "flights:book", "flights:read")})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if sessions.gotAgent != a.did || sessions.gotDeleg == nil || sessions.gotDeleg.AgentDID != a.did {
		t.Fatalf("IssueSession got agent %q delegation %+v", sessions.gotAgent, sessions.gotDeleg)
	}
	raw, err := json.Marshal(ResultResponse(json.RawMessage(`7`), v.Result()))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":7,"result":{"verified":true,"sessionId":"sess-1","agentDid":"` + a.did +
		`","userDid":"` + f.user.did + `","scopes":["flights:book","flights:read"],"expiresAt":"2030-01-02T03:04:05Z"}}`
	if string(raw) != want {
		t.Fatalf("response\n got %s\nwant %s", raw, want)
	}

	sessions2 := &fakeSessions{err: errors.New("session store down")}
	f2 := newFixture(t, WithSessionIssuer(sessions2))
	hr = f2.issue(t, a)
	if _, err := f2.svc.Verify(ctx, VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f2.clock.Now())), Credential: f2.credential(t, a.did)}); err == nil {
		t.Fatal("Verify succeeded although the session could not be issued")
	}
}

func TestIssue(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a := newAgent(t, didresolver.Ed25519)
	seen := map[string]bool{}
	for range 50 {
		hr, err := f.svc.Issue(ctx, HandshakeParams{AgentDID: a.did})
		if err != nil {
			t.Fatalf("Issue: %v", err)
		}
		for _, tok := range []string{hr.Challenge, hr.Nonce} {
			b, err := base64.RawURLEncoding.DecodeString(tok)
			if err != nil || len(b) < 16 {
				t.Fatalf("token %q is not >=128 bits of base64url", tok)
			}
			if seen[tok] {
				t.Fatalf("token repeated")
			}
			seen[tok] = true
		}
		if hr.ExpiresIn != 300 {
			t.Fatalf("ExpiresIn = %d", hr.ExpiresIn)
		}
		if strings.Join(hr.SupportedMethods, ",") != "Ed25519,P-256,secp256k1" {
			t.Fatalf("SupportedMethods = %v", hr.SupportedMethods)
		}
	}
	if f.store.Len() != 50 {
		t.Fatalf("store Len = %d", f.store.Len())
	}

	tests := []struct {
		name    string
		opts    []Option
		params  HandshakeParams
		methods []string
		wantErr error
	}{
		{name: "intersection", params: HandshakeParams{AgentDID: a.did, SupportedMethods: []string{"secp256k1", "Ed25519", "RSA"}}, methods: []string{"Ed25519", "secp256k1"}},
		{name: "aliases", params: HandshakeParams{AgentDID: a.did, SupportedMethods: []string{"ES256", "eddsa"}}, methods: []string{"Ed25519", "P-256"}},
		{name: "restricted service", opts: []Option{WithSupportedMethods("ed25519")}, params: HandshakeParams{AgentDID: a.did}, methods: []string{"Ed25519"}},
		{name: "nothing in common", params: HandshakeParams{AgentDID: a.did, SupportedMethods: []string{"RSA"}}, wantErr: ErrInvalidParams},
		{name: "not a DID", params: HandshakeParams{AgentDID: "agent456"}, wantErr: ErrInvalidParams},
		{name: "DID URL", params: HandshakeParams{AgentDID: a.did + "#key"}, wantErr: ErrInvalidParams},
		{name: "too many methods", params: HandshakeParams{AgentDID: a.did, SupportedMethods: make([]string, 17)}, wantErr: ErrInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts...)
			hr, err := f.svc.Issue(ctx, tt.params)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || Code(err) != -32602 {
					t.Fatalf("Issue = %v, want %v", err, tt.wantErr)
				}
				if f.store.Len() != 0 {
					t.Fatal("a failed handshake stored a challenge")
				}
				return
			}
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			if strings.Join(hr.SupportedMethods, ",") != strings.Join(tt.methods, ",") {
				t.Fatalf("SupportedMethods = %v, want %v", hr.SupportedMethods, tt.methods)
			}
		})
	}
}

// failingStore always fails as an unreachable store does.
type failingStore struct{}

func (failingStore) Put(context.Context, string, Record, time.Duration) error {
	return ErrStoreUnavailable
}
func (failingStore) Consume(context.Context, string) (Record, error) {
	return Record{}, ErrStoreUnavailable
}

func TestStoreUnavailableFailsClosed(t *testing.T) {
	ctx := context.Background()
	good := newFixture(t)
	a := newAgent(t, didresolver.Ed25519)
	hr := good.issue(t, a)
	p := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(good.clock.Now())), Credential: good.credential(t, a.did)}

	svc, err := New(WithStore(failingStore{}), WithClock(good.clock.Now), WithResolver(good.resolver), WithCredentialVerifier(good.verifier))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Issue(ctx, HandshakeParams{AgentDID: a.did}); !errors.Is(err, ErrStoreUnavailable) || Code(err) != -32000 {
		t.Fatalf("Issue = %v (code %d), want ErrStoreUnavailable -32000", err, Code(err))
	}
	if _, err := svc.Verify(ctx, p); !errors.Is(err, ErrStoreUnavailable) || Code(err) != -32000 {
		t.Fatalf("Verify = %v (code %d), want ErrStoreUnavailable -32000", err, Code(err))
	}
}

func TestNewRequiresDependencies(t *testing.T) {
	f := newFixture(t)
	base := []Option{WithStore(f.store), WithResolver(f.resolver), WithCredentialVerifier(f.verifier)}
	tests := []struct {
		name string
		opts []Option
		ok   bool
	}{
		{"complete", base, true},
		{"no store", base[1:], false},
		{"no resolver", []Option{base[0], base[2]}, false},
		{"no verifier", base[:2], false},
		{"ttl too short", append(base[:3:3], WithChallengeTTL(time.Millisecond)), false},
		{"negative skew", append(base[:3:3], WithSkew(-time.Second)), false},
		{"no known method", append(base[:3:3], WithSupportedMethods("RSA")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opts...)
			if (err == nil) != tt.ok || (s != nil) != tt.ok {
				t.Fatalf("New: %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestCustomTTLAndSkew(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, WithChallengeTTL(10*time.Second), WithSkew(5*time.Second))
	a := newAgent(t, didresolver.Ed25519)
	hr := f.issue(t, a)
	if hr.ExpiresIn != 10 {
		t.Fatalf("ExpiresIn = %d", hr.ExpiresIn)
	}
	f.clock.Advance(11 * time.Second)
	_, err := f.svc.Verify(ctx, VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now().Add(-4*time.Second))), Credential: f.credential(t, a.did)})
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("Verify = %v, want ErrExpired", err)
	}
	hr = f.issue(t, a)
	_, err = f.svc.Verify(ctx, VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(f.clock.Now().Add(-6*time.Second))), Credential: f.credential(t, a.did)})
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("Verify with stale timestamp = %v, want ErrExpired", err)
	}
}

func TestRegisterProxiedChallenge(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a := newAgent(t, didresolver.Ed25519)
	// An upstream issued this (hex, as in the seed).
	hr := HandshakeResult{Challenge: "a0b1c2d3e4f5a6b7c8d9", Nonce: "6789012345abcdef", ExpiresIn: 60}
	if err := f.svc.Register(ctx, a.did, hr); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if err := f.svc.Register(ctx, a.did, hr); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("second Register = %v, want ErrNonceExists", err)
	}
	sc := answer(t, a, hr, TimestampRFC3339(f.clock.Now()))
	if kid, err := f.svc.CheckProof(ctx, sc); err != nil || kid != a.kid {
		t.Fatalf("CheckProof = %q, %v", kid, err)
	}
	p := VerifyParams{SignedChallenge: sc, Credential: f.credential(t, a.did)}
	if _, err := f.svc.Verify(ctx, p); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if _, err := f.svc.Verify(ctx, p); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay = %v", err)
	}
	// ExpiresIn caps the lifetime below the TTL.
	hr2 := HandshakeResult{Challenge: "ffff", Nonce: "eeee", ExpiresIn: 60}
	if err := f.svc.Register(ctx, a.did, hr2); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(61 * time.Second)
	_, err := f.svc.Verify(ctx, VerifyParams{SignedChallenge: answer(t, a, hr2, TimestampRFC3339(f.clock.Now())), Credential: f.credential(t, a.did)})
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("Verify after upstream expiry = %v, want ErrExpired", err)
	}
	if err := f.svc.Register(ctx, "nope", hr); !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("Register bad DID = %v", err)
	}
}

func TestCheckProofRejects(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a, b := newAgent(t, didresolver.P256), newAgent(t, didresolver.P256)
	hr := HandshakeResult{Challenge: "abc", Nonce: "def"}
	sc := answer(t, b, hr, TimestampRFC3339(f.clock.Now()))
	sc.AgentDID = a.did
	if _, err := f.svc.CheckProof(ctx, sc); !errors.Is(err, ErrBadProof) {
		t.Fatalf("CheckProof wrong DID = %v", err)
	}
	old := answer(t, a, hr, TimestampRFC3339(f.clock.Now().Add(-time.Hour)))
	if _, err := f.svc.CheckProof(ctx, old); !errors.Is(err, ErrExpired) {
		t.Fatalf("CheckProof old = %v", err)
	}
}
