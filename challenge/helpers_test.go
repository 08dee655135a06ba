package challenge

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// agent is a real did:key identity.
type agent struct {
	priv crypto.PrivateKey
	did  string
	kid  string
}

func newAgent(t testing.TB, kt didresolver.KeyType) agent {
	t.Helper()
	priv, err := didresolver.GenerateKey(kt)
	if err != nil {
		t.Fatalf("GenerateKey(%s): %v", kt, err)
	}
	pub, err := didresolver.PublicKeyOf(priv)
	if err != nil {
		t.Fatalf("PublicKeyOf: %v", err)
	}
	did, kid, err := didresolver.KeyDID(pub)
	if err != nil {
		t.Fatalf("KeyDID: %v", err)
	}
	return agent{priv: priv, did: did, kid: kid}
}

// mapResolver serves fixed documents and falls back to did:key only (never
// the network).
type mapResolver struct {
	docs map[string]*didresolver.Document
	keys didresolver.Resolver
}

func newMapResolver() *mapResolver {
	return &mapResolver{docs: map[string]*didresolver.Document{}, keys: didresolver.New()}
}

func (r *mapResolver) Resolve(ctx context.Context, did string) (*didresolver.Document, error) {
	if d, ok := r.docs[did]; ok {
		return d, nil
	}
	if !strings.HasPrefix(did, "did:key:") {
		return nil, fmt.Errorf("%w: test resolver", didresolver.ErrNotFound)
	}
	return r.keys.Resolve(ctx, did)
}

// addWebDoc registers a did:web document whose authentication lists the
// given keys, in order.
func (r *mapResolver) addWebDoc(t testing.TB, did string, keys ...crypto.PrivateKey) {
	t.Helper()
	var vms []map[string]any
	var auth []string
	for i, k := range keys {
		pub, err := didresolver.PublicKeyOf(k)
		if err != nil {
			t.Fatal(err)
		}
		jwk, err := didresolver.PublicJWK(pub)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("%s#key-%d", did, i+1)
		vms = append(vms, map[string]any{"id": id, "type": "JsonWebKey2020", "controller": did, "publicKeyJwk": jwk})
		auth = append(auth, id)
	}
	raw, _ := json.Marshal(map[string]any{
		"@context":           []string{"https://www.w3.org/ns/did/v1"},
		"id":                 did,
		"verificationMethod": vms,
		"authentication":     auth,
		"assertionMethod":    auth,
	})
	doc, err := didresolver.ParseDocument(raw)
	if err != nil {
		t.Fatalf("ParseDocument: %v", err)
	}
	r.docs[did] = doc
}

// fixture is a Service with a memory store, a user who delegates, and real
// credentials.
type fixture struct {
	svc      *Service
	store    *MemoryStore
	clock    *fakeClock
	resolver *mapResolver
	user     agent
	verifier *vc.Verifier
}

func newFixture(t testing.TB, opts ...Option) *fixture {
	t.Helper()
	clock := newFakeClock(time.Now())
	store := NewMemoryStore(context.Background(), WithMemoryClock(clock.Now))
	t.Cleanup(func() { store.Close() })
	res := newMapResolver()
	f := &fixture{store: store, clock: clock, resolver: res, user: newAgent(t, didresolver.Ed25519)}
	f.verifier = vc.NewVerifier(res)
	all := append([]Option{
		WithStore(store), WithClock(clock.Now), WithResolver(res), WithCredentialVerifier(f.verifier),
	}, opts...)
	svc, err := New(all...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.svc = svc
	return f
}

// credential returns a VC-JWT by the fixture's user delegating scopes to
// agentDID, as the JSON string a verify request carries.
func (f *fixture) credential(t testing.TB, agentDID string, scopes ...string) json.RawMessage {
	t.Helper()
	jwt, err := vc.IssueJWT(f.user.priv, f.user.kid, vc.Template{
		AgentDID:  agentDID,
		UserDID:   f.user.did,
		Scopes:    scopes,
		ExpiresAt: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatalf("IssueJWT: %v", err)
	}
	b, _ := json.Marshal(jwt)
	return b
}

// answer runs the agent side: sign the issued challenge as a.
func answer(t testing.TB, a agent, hr HandshakeResult, ts Timestamp) SignedChallenge {
	t.Helper()
	sc, err := SignChallenge(a.priv, SignedChallenge{
		Challenge: hr.Challenge, Nonce: hr.Nonce, AgentDID: a.did, Timestamp: ts,
	})
	if err != nil {
		t.Fatalf("SignChallenge: %v", err)
	}
	return sc
}

// issue runs a handshake for a.
func (f *fixture) issue(t testing.TB, a agent) HandshakeResult {
	t.Helper()
	hr, err := f.svc.Issue(context.Background(), HandshakeParams{AgentDID: a.did, SupportedMethods: []string{"Ed25519", "P-256", "secp256k1"}, Version: "1.0"})
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	return hr
}

// verifyConcurrently sends p to svc n times at once and counts the answers
// admitted and the ones refused as replays; any other outcome fails t.
func verifyConcurrently(t *testing.T, svc *Service, p VerifyParams, n int) (ok, replay int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range n {
		wg.Go(func() {
			_, err := svc.Verify(context.Background(), p)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrReplay):
				replay++
			default:
				t.Errorf("Verify: %v", err)
			}
		})
	}
	wg.Wait()
	return ok, replay
}
