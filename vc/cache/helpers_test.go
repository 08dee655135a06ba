package cache

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The credentials of these tests: Ed25519 did:key issuers, VC-JWTs minted
// here (the verifier's formats are vc's tests' concern; the cache sees
// only credentials and rules).

// fixedNow is the clock of the tests that mint their own credentials.
var fixedNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const serverDID = "did:web:server.example.com"

type testKey struct {
	priv     ed25519.PrivateKey
	did, kid string
}

func newKey(t testing.TB) testKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	did, kid, err := didresolver.KeyDID(pub)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{priv: priv, did: did, kid: kid}
}

// fixture is an issuer, an agent, a key no credential names, and a
// resolver of their did:key DIDs.
type fixture struct {
	ed, agent, stranger testKey
	res                 didresolver.Resolver
}

func newFixture(t testing.TB) *fixture {
	return &fixture{ed: newKey(t), agent: newKey(t), stranger: newKey(t), res: didresolver.New()}
}

// verifier is a Verifier without a cache on the fixed clock.
func (f *fixture) verifier(opts ...vc.Option) *vc.Verifier {
	return vc.NewVerifier(f.res, append([]vc.Option{vc.WithClock(func() time.Time { return fixedNow })}, opts...)...)
}

// idMarker is the fixture credential's id, 36 bytes.
const idMarker = "3f0c0000-0000-4000-8000-000000000001"

// vc11Claims is a KYA-OS VC 1.1 VC-JWT payload issued by iss to the
// fixture's agent, valid from a minute before fixedNow for an hour, bound
// to serverDID, granting greeting:read and greeting:write.
func (f *fixture) vc11Claims(iss testKey) map[string]any {
	c := f.delegation(iss, f.agent.did, idMarker, "", -time.Minute, time.Hour, "greeting:read", "greeting:write")
	c["aud"] = serverDID
	c["iat"] = fixedNow.Add(-time.Minute).Unix()
	c["exp"] = fixedNow.Add(time.Hour).Unix()
	return c
}

// delegation is the VC-JWT payload of a credential from iss to subject
// with delegation id id (credential id "urn:uuid:"+id), valid from
// fixedNow+from to fixedNow+until, bound to serverDID, granting scopes;
// parent, when set, is its parentId.
func (f *fixture) delegation(iss testKey, subject, id, parent string, from, until time.Duration, scopes ...string) map[string]any {
	sc := make([]any, len(scopes))
	for i, s := range scopes {
		sc[i] = s
	}
	d := map[string]any{
		"id":          id,
		"issuerDid":   iss.did,
		"subjectDid":  subject,
		"scopes":      sc,
		"constraints": map[string]any{"scopes": sc, "audience": serverDID},
		"status":      "active",
	}
	if parent != "" {
		d["parentId"] = parent
	}
	return map[string]any{
		"iss": iss.did,
		"sub": subject,
		"jti": "urn:uuid:" + id,
		"vc": map[string]any{
			"@context": []any{
				"https://www.w3.org/2018/credentials/v1",
				"https://schema.kya-os.org/v1/protocol/delegation/context/v1.0.0",
			},
			"id":                "urn:uuid:" + id,
			"type":              []any{"VerifiableCredential", "DelegationCredential"},
			"issuer":            iss.did,
			"issuanceDate":      fixedNow.Add(from).Format(time.RFC3339Nano),
			"expirationDate":    fixedNow.Add(until).Format(time.RFC3339Nano),
			"credentialSubject": map[string]any{"id": subject, "delegation": d},
		},
	}
}

func header(kid string) map[string]any {
	return map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": kid}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// mint signs claims with priv under the header's kid.
func mint(t testing.TB, priv ed25519.PrivateKey, hdr, claims map[string]any) []byte {
	t.Helper()
	input := b64(mustJSON(t, hdr)) + "." + b64(mustJSON(t, claims))
	return []byte(input + "." + b64(ed25519.Sign(priv, []byte(input))))
}

// issue signs claims as k.
func issue(t testing.TB, k testKey, claims map[string]any) []byte {
	return mint(t, k.priv, header(k.kid), claims)
}

// setPath sets (or, for v == del, deletes) a member at a dotted path.
func setPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		m = m[p].(map[string]any)
	}
	last := parts[len(parts)-1]
	if v == del {
		delete(m, last)
		return
	}
	m[last] = v
}

type deleteMarker struct{}

var del = deleteMarker{}

// chain3 is a chain user → mid → mid2 → agent: f.ed delegates a, b, c to
// mid, mid a, b to mid2, mid2 a to the agent. Windows nest: the root is
// valid from -1h to +3h, the middle from -30m to +2h, the leaf from -1m to
// +1h.
type chain3 struct {
	root, middle, leaf []byte
}

func (f *fixture) chain3(t testing.TB) *chain3 {
	t.Helper()
	mid, mid2 := newKey(t), newKey(t)
	return &chain3{
		root:   issue(t, f.ed, f.delegation(f.ed, mid.did, "d-root", "", -time.Hour, 3*time.Hour, "a", "b", "c")),
		middle: issue(t, mid, f.delegation(mid, mid2.did, "d-mid", "d-root", -30*time.Minute, 2*time.Hour, "a", "b")),
		leaf:   issue(t, mid2, f.delegation(mid2, f.agent.did, "d-leaf", "d-mid", -time.Minute, time.Hour, "a")),
	}
}

// vpJWT is a VP-JWT by holder carrying the VC-JWTs creds, bound to
// serverDID and nonce "n-1", issued a minute before fixedNow. tweak may
// change the claims.
func vpJWT(t testing.TB, holder testKey, creds [][]byte, tweak func(claims map[string]any)) []byte {
	t.Helper()
	list := make([]any, len(creds))
	for i, c := range creds {
		list[i] = string(c)
	}
	claims := map[string]any{
		"iss":   holder.did,
		"aud":   serverDID,
		"nonce": "n-1",
		"jti":   "urn:uuid:vp-1",
		"iat":   fixedNow.Add(-time.Minute).Unix(),
		"exp":   fixedNow.Add(2 * time.Minute).Unix(),
		"vp": map[string]any{
			"@context":             []any{"https://www.w3.org/2018/credentials/v1"},
			"type":                 []any{"VerifiablePresentation"},
			"verifiableCredential": list,
		},
	}
	if tweak != nil {
		tweak(claims)
	}
	return issue(t, holder, claims)
}

// memGuard is a ReplayGuard in memory.
type memGuard struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (g *memGuard) Consume(_ context.Context, id string, _ time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen[id] {
		return errors.New("test: id already used")
	}
	if g.seen == nil {
		g.seen = map[string]bool{}
	}
	g.seen[id] = true
	return nil
}

// nonceOnce accepts nonce "n-1" once.
func nonceOnce() func(nonce, holder string) error {
	var used atomic.Bool
	return func(n, _ string) error {
		if n != "n-1" || used.Swap(true) {
			return errors.New("test: nonce unknown")
		}
		return nil
	}
}

// statusServer serves status lists over TLS (its client trusts it).
type statusServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	body map[string][]byte
	hits map[string]int
}

func newStatusServer(t testing.TB) *statusServer {
	t.Helper()
	s := &statusServer{body: map[string][]byte{}, hits: map[string]int{}}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		b, ok := s.body[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *statusServer) url(path string) string { return s.srv.URL + path }

func (s *statusServer) set(path string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body[path] = body
}

func (s *statusServer) hitCount(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// listJWT is a revocation StatusList2021Credential at url by iss, a
// VC-JWT, with bits set.
func listJWT(t testing.TB, iss testKey, url string, set ...int) []byte {
	t.Helper()
	bits := make([]byte, 131072/8)
	for _, i := range set {
		bits[i/8] |= 0x80 >> (i % 8)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(bits); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return issue(t, iss, map[string]any{
		"iss": iss.did,
		"jti": url,
		"vc": map[string]any{
			"@context":     []any{"https://www.w3.org/2018/credentials/v1", "https://w3id.org/vc/status-list/2021/v1"},
			"id":           url,
			"type":         []any{"VerifiableCredential", "StatusList2021Credential"},
			"issuer":       iss.did,
			"issuanceDate": fixedNow.Add(-time.Hour).Format(time.RFC3339),
			"credentialSubject": map[string]any{
				"id":            url + "#list",
				"type":          "StatusList2021",
				"statusPurpose": "revocation",
				"encodedList":   b64(buf.Bytes()),
			},
		},
	})
}

// statusEntry is a revocation credentialStatus for bit index of the list
// at url.
func statusEntry(url string, index int) map[string]any {
	return map[string]any{
		"id":                   fmt.Sprintf("%s#%d", url, index),
		"type":                 "StatusList2021Entry",
		"statusPurpose":        "revocation",
		"statusListIndex":      fmt.Sprint(index),
		"statusListCredential": url,
	}
}

// testClock is a clock tests can move.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// countingResolver counts resolutions (one per credential or presentation
// verified) of a real resolver; with a gate, each waits for it to close.
type countingResolver struct {
	res   didresolver.Resolver
	calls atomic.Int64
	gate  chan struct{}
	// fetchCancel: a wait cut short fails as didresolver.Cache's fetch
	// does, ErrFetch first.
	fetchCancel bool
}

func (r *countingResolver) Resolve(ctx context.Context, did string) (*didresolver.Document, error) {
	r.calls.Add(1)
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			if r.fetchCancel {
				return nil, fmt.Errorf("%w: %w", didresolver.ErrFetch, ctx.Err())
			}
			return nil, ctx.Err()
		}
	}
	return r.res.Resolve(ctx, did)
}

// hitCounter is a WithObserver.
type hitCounter struct{ hits, misses atomic.Int64 }

func (h *hitCounter) observe(hit bool) {
	if hit {
		h.hits.Add(1)
	} else {
		h.misses.Add(1)
	}
}

func (h *hitCounter) String() string {
	return fmt.Sprintf("%d hits, %d misses", h.hits.Load(), h.misses.Load())
}

// cached is a Cache of maxEntries (with copts) over a Verifier (with
// vopts) on clock, resolving through a counting resolver of the fixture's.
func (f *fixture) cached(clock *testClock, maxEntries int, copts []Option, vopts ...vc.Option) (*Cache, *countingResolver, *hitCounter) {
	res := &countingResolver{res: f.res}
	hc := &hitCounter{}
	v := vc.NewVerifier(res, append([]vc.Option{vc.WithClock(clock.now)}, vopts...)...)
	return New(v, maxEntries, append([]Option{WithObserver(hc.observe)}, copts...)...), res, hc
}

// expectCalls fails unless the resolver was called want times in all.
func expectCalls(t *testing.T, r *countingResolver, want int64, when string) {
	t.Helper()
	if got := r.calls.Load(); got != want {
		t.Fatalf("%s: %d resolutions, want %d", when, got, want)
	}
}

// keyInput is what c hashes for its key of raw under opts.
func keyInput(t testing.TB, c *Cache, raw []byte, opts ...vc.CheckOption) []byte {
	t.Helper()
	call, err := c.v.Prepare(raw, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer call.Release()
	in, ok := call.AppendKey(nil)
	if !ok {
		t.Fatal("the call bypasses the cache")
	}
	return in
}
