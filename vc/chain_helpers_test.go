package vc

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mr-tron/base58"
)

// Helpers for chains, presentations and status lists. Every credential,
// presentation and list is minted here with keys of the test.

// addKey registers a fresh key of type kt with the fixture's resolver.
func (f *fixture) addKey(t testing.TB, kt didresolver.KeyType) testKey {
	t.Helper()
	k := newKey(t, kt)
	f.res[k.did] = document(t, k.did, []method{{k.kid, k.pub}}, nil)
	return k
}

// delegationVC is an unsigned KYA-OS credential from iss to subject with
// delegation id id (credential id "urn:uuid:"+id), valid around fixedNow,
// bound to serverDID, granting scopes; parent, when set, is its parentId.
func (f *fixture) delegationVC(iss testKey, subject, id, parent string, scopes ...string) map[string]any {
	c := f.vc11Claims(iss)["vc"].(map[string]any)
	sc := make([]any, len(scopes))
	for i, s := range scopes {
		sc[i] = s
	}
	c["id"] = "urn:uuid:" + id
	setPath(c, "credentialSubject.id", subject)
	setPath(c, "credentialSubject.delegation.id", id)
	setPath(c, "credentialSubject.delegation.subjectDid", subject)
	setPath(c, "credentialSubject.delegation.scopes", sc)
	setPath(c, "credentialSubject.delegation.constraints.scopes", sc)
	if parent != "" {
		setPath(c, "credentialSubject.delegation.parentId", parent)
	}
	return c
}

// signCred signs a credential map: an MCP-I JSON VC for an Ed25519 issuer
// unless asJWT, else a VC 1.1 VC-JWT whose claims repeat the credential's.
func signCred(t testing.TB, k testKey, c map[string]any, asJWT bool) []byte {
	t.Helper()
	if !asJWT {
		return signEd25519JCS(t, k, c, false)
	}
	claims := map[string]any{
		"iss": k.did,
		"sub": c["credentialSubject"].(map[string]any)["id"],
		"jti": c["id"],
		"vc":  c,
	}
	return mint(t, k.priv, header(algOf(t, k), k.kid), claims)
}

// chain3 is a chain user → mid → mid2 → agent: f.ed delegates a, b, c to
// mid (JSON VC), mid delegates a, b to mid2 (JSON VC), mid2 (P-256)
// delegates a to the agent (VC-JWT, ES256). Windows nest: the root is
// valid from -1h to +3h, the middle from -30m to +2h, the leaf from -1m to
// +1h. tweak may change link i (0 root, 2 leaf) before it is signed.
type chain3 struct {
	user, mid, mid2 testKey
	root, middle    []byte
	leaf            []byte
}

func (f *fixture) chain3(t testing.TB, tweak func(i int, c map[string]any)) *chain3 {
	t.Helper()
	ch := &chain3{user: f.ed, mid: f.addKey(t, didresolver.Ed25519), mid2: f.addKey(t, didresolver.P256)}
	window := func(c map[string]any, from, until time.Duration) {
		c["issuanceDate"] = fixedNow.Add(from).Format(time.RFC3339)
		c["expirationDate"] = fixedNow.Add(until).Format(time.RFC3339)
	}
	r := f.delegationVC(ch.user, ch.mid.did, "d-root", "", "a", "b", "c")
	window(r, -time.Hour, 3*time.Hour)
	m := f.delegationVC(ch.mid, ch.mid2.did, "d-mid", "d-root", "a", "b")
	window(m, -30*time.Minute, 2*time.Hour)
	l := f.delegationVC(ch.mid2, f.agent.did, "d-leaf", "d-mid", "a")
	window(l, -time.Minute, time.Hour)
	if tweak != nil {
		tweak(0, r)
		tweak(1, m)
		tweak(2, l)
	}
	ch.root = signCred(t, ch.user, r, false)
	ch.middle = signCred(t, ch.mid, m, false)
	ch.leaf = signCred(t, ch.mid2, l, true)
	return ch
}

// vpJWT is a VP-JWT (VC 1.1 "vp" claim) by holder carrying creds (each a
// VC-JWT string or a JSON credential), bound to serverDID and nonce
// "n-1", issued a minute before fixedNow. tweak may change the claims.
func vpJWT(t testing.TB, holder testKey, creds [][]byte, tweak func(claims map[string]any)) []byte {
	t.Helper()
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
			"verifiableCredential": credList(t, creds),
		},
	}
	if tweak != nil {
		tweak(claims)
	}
	return mint(t, holder.priv, header(algOf(t, holder), holder.kid), claims)
}

// credList turns credentials into verifiableCredential entries.
func credList(t testing.TB, creds [][]byte) []any {
	t.Helper()
	out := make([]any, len(creds))
	for i, c := range creds {
		if c[0] == '{' {
			out[i] = decodeJSON(t, c)
		} else {
			out[i] = string(c)
		}
	}
	return out
}

// jsonVP is an unsigned JSON VP by holder carrying creds.
func jsonVP(t testing.TB, holder testKey, creds [][]byte) map[string]any {
	t.Helper()
	return map[string]any{
		"@context":             []any{"https://www.w3.org/ns/credentials/v2"},
		"id":                   "urn:uuid:jsonvp-1",
		"type":                 []any{"VerifiablePresentation"},
		"holder":               holder.did,
		"verifiableCredential": credList(t, creds),
	}
}

// vpProofOptions are the proof members of a JSON VP bound to serverDID
// and nonce "n-1", made a minute before fixedNow.
func vpProofOptions(k testKey) map[string]any {
	return map[string]any{
		"type":               "Ed25519Signature2020",
		"created":            fixedNow.Add(-time.Minute).Format(time.RFC3339),
		"verificationMethod": k.kid,
		"proofPurpose":       "authentication",
		"challenge":          "n-1",
		"domain":             serverDID,
	}
}

// signVPEd25519JCS signs a JSON VP with the MCP-I suite as this package
// defines it for presentations: over JCS of the presentation with its
// proof minus proofValue.
func signVPEd25519JCS(t testing.TB, k testKey, vp, proof map[string]any) []byte {
	t.Helper()
	vp["proof"] = proof
	sig := ed25519.Sign(k.priv.(ed25519.PrivateKey), jcsOf(t, vp))
	proof["proofValue"] = b64(sig)
	return mustJSON(t, vp)
}

// signVPEddsaJCS2022 signs a JSON VP with eddsa-jcs-2022 and the given
// proof options (type and cryptosuite are set here), written from the W3C
// algorithm like signEddsaJCS2022.
func signVPEddsaJCS2022(t testing.TB, k testKey, vp, proof map[string]any) []byte {
	t.Helper()
	proof["type"] = "DataIntegrityProof"
	proof["cryptosuite"] = "eddsa-jcs-2022"
	config := map[string]any{"@context": vp["@context"]}
	for key, v := range proof {
		config[key] = v
	}
	ch := sha256.Sum256(jcsOf(t, config))
	dh := sha256.Sum256(jcsOf(t, vp))
	sig := ed25519.Sign(k.priv.(ed25519.PrivateKey), append(ch[:], dh[:]...))
	proof["proofValue"] = "z" + base58.Encode(sig)
	vp["proof"] = proof
	return mustJSON(t, vp)
}

// memGuard is a ReplayGuard in memory.
type memGuard struct {
	mu   sync.Mutex
	seen map[string]time.Duration
	err  error // returned by every Consume when set
}

var errSeen = errors.New("test: id already used")

func (g *memGuard) Consume(_ context.Context, id string, ttl time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return g.err
	}
	if g.seen == nil {
		g.seen = map[string]time.Duration{}
	}
	if _, ok := g.seen[id]; ok {
		return errSeen
	}
	g.seen[id] = ttl
	return nil
}

// nonceOnce accepts nonce "n-1" once.
func nonceOnce() func(nonce, holder string) error {
	var mu sync.Mutex
	used := false
	return func(n, _ string) error {
		mu.Lock()
		defer mu.Unlock()
		if n != "n-1" || used {
			return errors.New("test: nonce unknown")
		}
		used = true
		return nil
	}
}

// Status lists.

const statusHost = "status.example.com"

func statusURL(path string) string { return "https://" + statusHost + path }

// encodeList is the encodedList of a list of n bits with set bits on:
// gzip, then base64url without padding (multibase adds "u").
func encodeList(t testing.TB, n int, multibase bool, set ...int) string {
	t.Helper()
	bits := make([]byte, n/8)
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
	s := base64.RawURLEncoding.EncodeToString(buf.Bytes())
	if multibase {
		s = "u" + s
	}
	return s
}

// listCred is an unsigned status list credential at url by iss: a
// StatusList2021Credential, or with bitstring a
// BitstringStatusListCredential, for purpose, with bits set.
func listCred(t testing.TB, iss testKey, url, purpose string, bitstring bool, set ...int) map[string]any {
	t.Helper()
	if bitstring {
		return map[string]any{
			"@context":   []any{"https://www.w3.org/ns/credentials/v2"},
			"id":         url,
			"type":       []any{"VerifiableCredential", "BitstringStatusListCredential"},
			"issuer":     iss.did,
			"validFrom":  fixedNow.Add(-time.Hour).Format(time.RFC3339),
			"validUntil": fixedNow.Add(24 * time.Hour).Format(time.RFC3339),
			"credentialSubject": map[string]any{
				"id":            url + "#list",
				"type":          "BitstringStatusList",
				"statusPurpose": purpose,
				"encodedList":   encodeList(t, 131072, true, set...),
			},
		}
	}
	return map[string]any{
		"@context":     []any{"https://www.w3.org/2018/credentials/v1", "https://w3id.org/vc/status-list/2021/v1"},
		"id":           url,
		"type":         []any{"VerifiableCredential", "StatusList2021Credential"},
		"issuer":       iss.did,
		"issuanceDate": fixedNow.Add(-time.Hour).Format(time.RFC3339),
		"credentialSubject": map[string]any{
			"id":            url + "#list",
			"type":          "StatusList2021",
			"statusPurpose": purpose,
			"encodedList":   encodeList(t, 131072, false, set...),
		},
	}
}

// statusEntryFor is a credentialStatus entry for bit index of the list at
// url.
func statusEntryFor(url, purpose string, bitstring bool, index string) map[string]any {
	typ := "StatusList2021Entry"
	if bitstring {
		typ = "BitstringStatusListEntry"
	}
	return map[string]any{
		"id":                   url + "#" + index,
		"type":                 typ,
		"statusPurpose":        purpose,
		"statusListIndex":      index,
		"statusListCredential": url,
	}
}

// statusServer serves status lists over TLS with a certificate for
// statusHost (and 127.0.0.1); its client dials it for every host, so
// credentials can name https://status.example.com/… .
type statusServer struct {
	srv   *httptest.Server
	roots *x509.CertPool
	mu    sync.Mutex
	body  map[string][]byte
	code  int           // when not 0, every request gets this status
	delay time.Duration // before answering
	hits  map[string]int
}

func newStatusServer(t testing.TB) *statusServer {
	t.Helper()
	cert, roots := selfSigned(t, statusHost)
	s := &statusServer{roots: roots, body: map[string][]byte{}, hits: map[string]int{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *statusServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	b, ok := s.body[r.URL.Path]
	code, delay := s.code, s.delay
	s.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	switch {
	case code != 0:
		w.WriteHeader(code)
	case !ok:
		http.NotFound(w, r)
	default:
		w.Header().Set("Content-Type", "application/vc+ld+json")
		_, _ = w.Write(b)
	}
}

func (s *statusServer) set(path string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body[path] = body
}

func (s *statusServer) setCode(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.code = code
}

func (s *statusServer) hitCount(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// client trusts the server's certificate and connects to it whatever the
// URL's host.
func (s *statusServer) client() *http.Client {
	addr := s.srv.Listener.Addr().String()
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: s.roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// selfSigned is a P-256 certificate for host and 127.0.0.1 that is its own
// root.
func selfSigned(t testing.TB, host string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, roots
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
