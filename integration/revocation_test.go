package integration

import (
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// revocationTTL is the edge's status_list_ttl in these tests: short, so
// that a list cached before the status server stops expires quickly.
const revocationTTL = time.Second

// TestRevocation: a delegation whose credentialStatus points at a
// StatusList2021 list served over https reaches the MCP server through the
// real Caddy binary while its bit is clear, and is refused with 401
// revoked, before the upstream sees anything, when its bit is set. Once
// the status server is gone, credentials whose status cannot be read are
// refused with 503 status_unavailable (fail closed), a fresh one and the
// one admitted before alike.
//
// The edge fetches status lists over https with Go's default roots; Caddy
// trusts the test server's certificate through SSL_CERT_FILE.
func TestRevocation(t *testing.T) {
	st := newStatusListServer(t)
	h := newRevocationHarness(t, st)
	w := newWorld(t, h)
	// The harness trusts one issuer, fixed before the world exists.
	w.issuer = st.issuer

	const listPath = "/status/1"
	listURL := st.url(listPath)
	st.set(listPath, statusListVC(t, st.issuer, listURL, 42))

	active := revocableJWT(t, w, "urn:uuid:revocation-active", listURL, 7)
	revoked := revocableJWT(t, w, "urn:uuid:revocation-revoked", listURL, 42)

	t.Run("bit clear", func(t *testing.T) {
		h.listToolsAdmitted(t, "/mcp", http.Header{"Authorization": {"Bearer " + active}}, active)
		if n := st.hitCount(listPath); n == 0 {
			t.Error("the edge never fetched the status list")
		}
	})

	t.Run("bit set", func(t *testing.T) {
		h.upstream.Reset()
		ctx := testContext(t)
		if _, err := h.connect(ctx, "/mcp", http.Header{"Authorization": {"Bearer " + revoked}}, legacyProtocol, nil); err == nil {
			t.Fatal("connected with a revoked delegation")
		}
		h.listToolsRefused(ctx, t, "/mcp", http.Header{"Authorization": {"Bearer " + revoked}}, http.StatusUnauthorized, "invalid_token", "revoked")
	})

	t.Run("status server down", func(t *testing.T) {
		st.srv.Close()
		// Past the TTL neither the list nor a verification that relied on
		// it is used any more (no status_stale_if_error).
		time.Sleep(2 * revocationTTL)
		h.upstream.Reset()
		ctx := testContext(t)
		fresh := revocableJWT(t, w, "urn:uuid:revocation-fresh", listURL, 8)
		for _, tc := range []struct{ name, tok string }{{"fresh credential", fresh}, {"admitted before", active}} {
			resp := h.post(ctx, "/mcp", http.Header{"Authorization": {"Bearer " + tc.tok}}, "", map[string]any{
				"jsonrpc": "2.0", "id": 1, "method": "tools/list",
			})
			body := h.assertEdgeError(t, resp, http.StatusServiceUnavailable, "temporarily_unavailable")
			if body.Reason != "status_unavailable" {
				t.Errorf("%s: reason %q, want status_unavailable", tc.name, body.Reason)
			}
		}
		if reqs := h.upstream.Requests(); len(reqs) != 0 {
			t.Errorf("upstream saw %d requests", len(reqs))
		}
	})
}

// statusListServer serves status list credentials over TLS on 127.0.0.1
// (httptest's certificate, for 127.0.0.1), all issued by issuer.
type statusListServer struct {
	srv    *httptest.Server
	issuer party
	// certFile holds the server's certificate (PEM), for SSL_CERT_FILE.
	certFile string
	mu       sync.Mutex
	body     map[string][]byte
	hits     map[string]int
}

func newStatusListServer(t *testing.T) *statusListServer {
	t.Helper()
	s := &statusListServer{issuer: newParty(t, didresolver.Ed25519), body: map[string][]byte{}, hits: map[string]int{}}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	s.certFile = filepath.Join(t.TempDir(), "status-ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	if err := os.WriteFile(s.certFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *statusListServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	b, ok := s.body[r.URL.Path]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/vc+ld+json")
	_, _ = w.Write(b)
}

// url is the https URL of path on the server (https://127.0.0.1:<port>…).
func (s *statusListServer) url(path string) string { return s.srv.URL + path }

func (s *statusListServer) set(path string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body[path] = body
}

func (s *statusListServer) hitCount(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// newRevocationHarness starts the recorded demo MCP server and Caddy in
// front of it, like newHarness, with one route that trusts only st's
// issuer, lets status lists come from loopback (allow_private_did_web) and
// caches them for revocationTTL. Caddy runs with SSL_CERT_FILE set to st's
// certificate.
func newRevocationHarness(t *testing.T, st *statusListServer) *harness {
	t.Helper()
	rec := &recorder{next: mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	adminPort := freePort(t)
	dir := t.TempDir()

	caddyfile := testCaddyfile(adminPort, filepath.Join(dir, "storage"), fmt.Sprintf(`:%d {
	bind 127.0.0.1
	handle {
		mcpi {
			trust %s
			allow_private_did_web
			status_list_ttl %s
		}
		reverse_proxy %s
	}
}
`, h.port, st.issuer.did, revocationTTL, up.Listener.Addr().String()))
	h.start(dir, caddyfile, "SSL_CERT_FILE="+st.certFile)
	return h
}

// revocableJWT is a VC-JWT of the world's delegation with id, signed by the
// world's issuer, whose credentialStatus is bit index of the
// StatusList2021 list at listURL. (vc.Template has no credentialStatus: the
// claims IssueJWT signed get one and are signed again.)
func revocableJWT(t *testing.T, w *world, id, listURL string, index int) string {
	t.Helper()
	tok := w.jwt(t, func(tm *vc.Template) { tm.ID = id })
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	idx := strconv.Itoa(index)
	claims["vc"].(map[string]any)["credentialStatus"] = map[string]any{
		"id":                   listURL + "#" + idx,
		"type":                 "StatusList2021Entry",
		"statusPurpose":        "revocation",
		"statusListIndex":      idx,
		"statusListCredential": listURL,
	}
	return dlgSign(t, w.issuer, claims)
}

// statusListVC is a StatusList2021Credential at listURL by iss, for
// revocation, with the bits set on (of 131072), signed as an MCP-I JSON VC:
// an Ed25519Signature2020 proof whose proofValue is base64url of the
// signature over JCS of the credential without its proof.
func statusListVC(t *testing.T, iss party, listURL string, set ...int) []byte {
	t.Helper()
	now := time.Now().UTC()
	cred := map[string]any{
		"@context":       []any{"https://www.w3.org/2018/credentials/v1", "https://w3id.org/vc/status-list/2021/v1"},
		"id":             listURL,
		"type":           []any{"VerifiableCredential", "StatusList2021Credential"},
		"issuer":         iss.did,
		"issuanceDate":   now.Add(-time.Hour).Format(time.RFC3339),
		"expirationDate": now.Add(24 * time.Hour).Format(time.RFC3339),
		"credentialSubject": map[string]any{
			"id":            listURL + "#list",
			"type":          "StatusList2021",
			"statusPurpose": "revocation",
			"encodedList":   encodedList(t, 131072, set...),
		},
	}
	unsigned, err := json.Marshal(cred)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := jcs.Transform(unsigned)
	if err != nil {
		t.Fatal(err)
	}
	cred["proof"] = map[string]any{
		"type":               "Ed25519Signature2020",
		"created":            now.Add(-time.Hour).Format(time.RFC3339),
		"verificationMethod": iss.kid,
		"proofPurpose":       "assertionMethod",
		"proofValue":         base64.RawURLEncoding.EncodeToString(ed25519.Sign(iss.key.(ed25519.PrivateKey), msg)),
	}
	b, err := json.Marshal(cred)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encodedList is a list of n bits with set on (bit i is bit 7-i%8 of byte
// i/8), gzipped, base64url without padding.
func encodedList(t *testing.T, n int, set ...int) string {
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
	return base64.RawURLEncoding.EncodeToString(buf.Bytes())
}
