package edge

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/admit"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/edge/observe/observetest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// Tests of delegation.go: require_presentation, the replay guard and
// presentation nonces, the KYA-OS-Delegation-Chain carrier, status lists
// and the JSON-LD settings.

// b64json is base64url (no padding) of the JSON of v.
func b64json(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// signJWT signs claims as p with EdDSA.
func signJWT(t testing.TB, p party, claims map[string]any) string {
	t.Helper()
	input := b64json(t, map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": p.kid}) + "." + b64json(t, claims)
	sig := ed25519.Sign(p.priv.(ed25519.PrivateKey), []byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// issueAs mints a VC-JWT from tm signed by iss; mod may change the claims
// (the credential is claims["vc"]) before they are signed.
func issueAs(t testing.TB, iss party, tm vc.Template, mod func(claims, cred map[string]any)) string {
	t.Helper()
	tok, err := vc.IssueJWT(iss.priv, iss.kid, tm)
	if err != nil {
		t.Fatal(err)
	}
	if mod == nil {
		return tok
	}
	parts := strings.Split(tok, ".")
	pb, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(pb, &claims); err != nil {
		t.Fatal(err)
	}
	mod(claims, claims["vc"].(map[string]any))
	return signJWT(t, iss, claims)
}

// setDelegation sets credentialSubject.delegation.<key> of a credential.
func setDelegation(cred map[string]any, key string, v any) {
	cred["credentialSubject"].(map[string]any)["delegation"].(map[string]any)[key] = v
}

func randomID(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// vpOf wraps credentials in a VP-JWT signed by holder, for this edge's
// audience, with a fresh jti; nonce is left out when empty. mod may change
// the claims.
func vpOf(t testing.TB, holder party, nonce string, mod func(map[string]any), creds ...any) string {
	t.Helper()
	now := time.Now()
	claims := map[string]any{
		"iss": holder.did, "aud": "https://" + testHost, "jti": "urn:uuid:vp-" + randomID(t),
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(2 * time.Minute).Unix(),
		"vp": map[string]any{
			"@context":             []any{"https://www.w3.org/2018/credentials/v1"},
			"type":                 []any{"VerifiablePresentation"},
			"verifiableCredential": creds,
		},
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	if mod != nil {
		mod(claims)
	}
	return signJWT(t, holder, claims)
}

func bearer(tok string) *http.Request {
	r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

// wantRejected checks a rejection's status and reason (or error code when
// reason is empty) and that nothing was forwarded.
func wantRejected(t testing.TB, res result, status int, reason string) {
	t.Helper()
	if res.called {
		t.Fatalf("forwarded; want %d %s", status, reason)
	}
	if res.rec.Code != status {
		t.Fatalf("status %d, want %d: %s", res.rec.Code, status, res.rec.Body)
	}
	if b := decodeErr(t, res.rec); b.Reason != reason && b.Error != reason {
		t.Fatalf("body %+v, want reason %q", b, reason)
	}
}

func wantAdmitted(t testing.TB, res result) {
	t.Helper()
	if !res.called {
		t.Fatalf("not forwarded: %d %s", res.rec.Code, res.rec.Body)
	}
}

func TestRequirePresentation(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, func(c *setup) { c.RequirePresentation = true })
	cred := f.jwt(t, nil)

	t.Run("bare credential", func(t *testing.T) {
		wantRejected(t, serve(t, h, bearer(cred)), http.StatusUnauthorized, "presentation_required")
	})
	t.Run("bare JSON credential in the body", func(t *testing.T) {
		body := bodyWith(t, "_mcpi_delegation", json.RawMessage(f.jsonVC(t, nil)), true)
		wantRejected(t, serve(t, h, newRequest(http.MethodPost, "/mcp", body)), http.StatusUnauthorized, "presentation_required")
	})
	t.Run("VP-JWT by the agent", func(t *testing.T) {
		vp := vpOf(t, f.agent, "", nil, cred)
		res := serve(t, h, bearer(vp))
		wantAdmitted(t, res)
		if got, _ := res.repl.GetString("mcpi.agent_did"); got != f.agent.did {
			t.Errorf("agent_did %q", got)
		}
		if res.fwd.Header.Get("Authorization") != "" {
			t.Error("the presentation was forwarded")
		}
		// Single use at Level 1 too: the same VP is a replay.
		if _, err := h.verifier.Verify(context.Background(), []byte(vp), h.admit.Checks(bearer(vp))...); !errors.Is(err, vc.ErrReplay) {
			t.Fatalf("Verify of the same VP again: %v, want vc.ErrReplay", err)
		}
	})
	t.Run("VP-JWT by someone else", func(t *testing.T) {
		wantRejected(t, serve(t, h, bearer(vpOf(t, newParty(t), "", nil, cred))), http.StatusUnauthorized, "wrong_holder")
	})
	t.Run("level 3: the handshake takes a bare credential", func(t *testing.T) {
		h := f.l3Handler(t, func(c *setup) { c.RequirePresentation = true })
		hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
		rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, answer(t, f.agent, hr), cred), nil)
		var vr struct {
			SessionID string `json:"sessionId"`
		}
		if rep.Error != nil || json.Unmarshal(rep.Result, &vr) != nil || vr.SessionID == "" {
			t.Fatalf("verify: %d %s", rep.Status, rep.Raw)
		}
		r := newRequest(http.MethodPost, "/mcp", toolsCallBody)
		r.Header.Set("Mcp-Session-Id", vr.SessionID)
		wantAdmitted(t, serve(t, h, r))
		wantRejected(t, serve(t, h, bearer(cred)), http.StatusUnauthorized, "presentation_required")
	})
	t.Run("VP-JWT for another audience", func(t *testing.T) {
		vp := vpOf(t, f.agent, "", func(c map[string]any) { c["aud"] = "https://elsewhere.example" }, cred)
		wantRejected(t, serve(t, h, bearer(vp)), http.StatusUnauthorized, "wrong_audience")
	})
}

func TestPresentationReplayAndNonce(t *testing.T) {
	f := newFixture(t)
	cred := f.jwt(t, nil)

	t.Run("level 1 is single use too", func(t *testing.T) {
		h := f.handler(t, nil)
		vp := vpOf(t, f.agent, "", nil, cred)
		wantAdmitted(t, serve(t, h, bearer(vp)))
		wantRejected(t, serve(t, h, bearer(vp)), http.StatusUnauthorized, "replayed")
	})

	h := f.l3Handler(t, nil)
	t.Run("replayed VP", func(t *testing.T) {
		vp := vpOf(t, f.agent, "", nil, cred)
		wantAdmitted(t, serve(t, h, bearer(vp)))
		wantRejected(t, serve(t, h, bearer(vp)), http.StatusUnauthorized, "replayed")
		// A new presentation of the same credential is fine.
		wantAdmitted(t, serve(t, h, bearer(vpOf(t, f.agent, "", nil, cred))))
		// A bare credential is not a presentation: no replay guard.
		wantAdmitted(t, serve(t, h, bearer(cred)))
		wantAdmitted(t, serve(t, h, bearer(cred)))
	})
	t.Run("VP without an id", func(t *testing.T) {
		vp := vpOf(t, f.agent, "", func(c map[string]any) { delete(c, "jti") }, cred)
		wantAdmitted(t, serve(t, h, bearer(vp)))
		wantRejected(t, serve(t, h, bearer(vp)), http.StatusUnauthorized, "replayed")
	})
	t.Run("VP bound to a handshake challenge", func(t *testing.T) {
		hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
		vp := vpOf(t, f.agent, hr.Nonce, func(c map[string]any) { delete(c, "aud") }, cred)
		wantAdmitted(t, serve(t, h, bearer(vp)))
		// The challenge is spent.
		wantRejected(t, serve(t, h, bearer(vp)), http.StatusUnauthorized, "bad_presentation")
		// It cannot be answered by the handshake any more either.
		rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, answer(t, f.agent, hr), cred), nil)
		if rep.Error == nil {
			t.Fatalf("challenge used by a VP was accepted by verify: %s", rep.Raw)
		}
	})
	t.Run("nonce the edge never issued", func(t *testing.T) {
		vp := vpOf(t, f.agent, "made-up", nil, cred)
		wantRejected(t, serve(t, h, bearer(vp)), http.StatusUnauthorized, "bad_presentation")
	})
	t.Run("nonce issued to another agent", func(t *testing.T) {
		hr := doHandshake(t, h, defaultHandshakePath, newParty(t), nil)
		vp := vpOf(t, f.agent, hr.Nonce, nil, cred)
		wantRejected(t, serve(t, h, bearer(vp)), http.StatusUnauthorized, "bad_presentation")
	})
	t.Run("another agent's valid VP burns no challenge", func(t *testing.T) {
		// The other agent holds a valid credential of its own and signs
		// correctly: only the challenge's owner may spend it.
		other := newParty(t)
		otherCred := f.jwt(t, func(tm *vc.Template) { tm.AgentDID = other.did })
		hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
		wantRejected(t, serve(t, h, bearer(vpOf(t, other, hr.Nonce, nil, otherCred))), http.StatusUnauthorized, "bad_presentation")
		wantAdmitted(t, serve(t, h, bearer(vpOf(t, f.agent, hr.Nonce, nil, cred))))
	})
	t.Run("nonce naming a replay record", func(t *testing.T) {
		first := vpOf(t, f.agent, "", nil, cred)
		wantAdmitted(t, serve(t, h, bearer(first)))
		// Whatever the id, a "vp:" nonce is never taken from the store.
		vp := vpOf(t, f.agent, admit.ReplayKeyPrefix+"x", nil, cred)
		wantRejected(t, serve(t, h, bearer(vp)), http.StatusUnauthorized, "bad_presentation")
		wantRejected(t, serve(t, h, bearer(first)), http.StatusUnauthorized, "replayed")
	})
	t.Run("forged VP burns no challenge", func(t *testing.T) {
		hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
		forged := vpOf(t, newParty(t), hr.Nonce, nil, cred)
		wantRejected(t, serve(t, h, bearer(forged)), http.StatusUnauthorized, "wrong_holder")
		wantAdmitted(t, serve(t, h, bearer(vpOf(t, f.agent, hr.Nonce, nil, cred))))
	})
	t.Run("store down", func(t *testing.T) {
		// A store of its own, so closing it disturbs no other handler.
		store := challenge.NewMemoryStore(bareContext(t))
		h := f.l3Handler(t, func(c *setup) { c.use(WithNonceStore(store, "memory")) })
		wantAdmitted(t, serve(t, h, bearer(vpOf(t, f.agent, "", nil, cred))))
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		res := serve(t, h, bearer(vpOf(t, f.agent, "", nil, cred)))
		wantRejected(t, res, http.StatusServiceUnavailable, "temporarily_unavailable")
		if b := decodeErr(t, res.rec); b.ErrorDescription != "presentation could not be checked" {
			t.Errorf("body %+v", b)
		}
		if res.rec.Header().Get("WWW-Authenticate") != "" {
			t.Error("503 with a credential challenge")
		}
	})
}

// chainFixture is a chain user → mid → agent: the user (the only trusted
// issuer) delegates to mid, mid delegates onwards to the agent.
type chainFixture struct {
	fixture
	mid              party
	root, leaf       string // VC-JWTs
	rootJSON         []byte // the root as an MCP-I JSON VC
	rootID, rootDlgt string
}

func newChainFixture(t testing.TB) chainFixture {
	t.Helper()
	c := chainFixture{fixture: newFixture(t), mid: newParty(t)}
	now := time.Now()
	c.rootID = "urn:uuid:" + randomID(t)
	c.rootDlgt = strings.TrimPrefix(c.rootID, "urn:uuid:")
	rootTm := c.template(func(tm *vc.Template) {
		tm.AgentDID = c.mid.did
		tm.ID = c.rootID
		tm.NotBefore = now.Add(-2 * time.Minute)
		tm.ExpiresAt = now.Add(2 * time.Hour)
	})
	c.root = issueAs(t, c.user, rootTm, nil)
	var err error
	if c.rootJSON, err = vc.IssueJSON(c.user.priv.(ed25519.PrivateKey), c.user.kid, rootTm); err != nil {
		t.Fatal(err)
	}
	c.leaf = issueAs(t, c.mid, c.template(func(tm *vc.Template) {
		tm.ID = "urn:uuid:" + randomID(t)
		tm.Scopes = []string{"tools:read"}
	}), func(_, cred map[string]any) { setDelegation(cred, "parentId", c.rootDlgt) })
	return c
}

func TestDelegationChain(t *testing.T) {
	c := newChainFixture(t)
	h := c.handler(t, nil)
	withChain := func(r *http.Request, vals ...string) *http.Request {
		for _, v := range vals {
			r.Header.Add("KYA-OS-Delegation-Chain", v)
		}
		return r
	}
	admitted := func(t *testing.T, res result) {
		t.Helper()
		wantAdmitted(t, res)
		for k, want := range map[string]string{
			"mcpi.user_did": c.user.did, "mcpi.agent_did": c.agent.did,
			"mcpi.issuer": c.mid.did, "mcpi.scopes": "tools:read",
		} {
			if got, _ := res.repl.GetString(k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		for k := range res.fwd.Header {
			if strings.EqualFold(k, "Kya-Os-Delegation-Chain") || k == "Authorization" {
				t.Errorf("%s forwarded", k)
			}
		}
	}

	t.Run("parent in the chain header", func(t *testing.T) {
		admitted(t, serve(t, h, withChain(bearer(c.leaf), c.root)))
	})
	t.Run("comma-separated, with an unrelated credential", func(t *testing.T) {
		admitted(t, serve(t, h, withChain(bearer(c.leaf), c.jwt(t, nil)+", "+c.root)))
	})
	t.Run("several header values", func(t *testing.T) {
		admitted(t, serve(t, h, withChain(bearer(c.leaf), c.jwt(t, nil), c.root)))
	})
	t.Run("JSON array with a JSON VC", func(t *testing.T) {
		arr := `["` + c.jwt(t, nil) + `", ` + string(c.rootJSON) + `]`
		admitted(t, serve(t, h, withChain(bearer(c.leaf), arr)))
	})
	t.Run("one JSON VC", func(t *testing.T) {
		admitted(t, serve(t, h, withChain(bearer(c.leaf), string(c.rootJSON))))
	})
	t.Run("leaf in the body, parent in the header", func(t *testing.T) {
		r := newRequest(http.MethodPost, "/mcp", bodyWith(t, "delegationToken", c.leaf, false))
		admitted(t, serve(t, h, withChain(r, c.root)))
	})
	t.Run("VP of the leaf, parent in the header", func(t *testing.T) {
		admitted(t, serve(t, h, withChain(bearer(vpOf(t, c.agent, "", nil, c.leaf)), c.root)))
	})
	t.Run("VP carrying the chain", func(t *testing.T) {
		admitted(t, serve(t, h, bearer(vpOf(t, c.agent, "", nil, c.leaf, c.root))))
	})

	t.Run("leaf alone", func(t *testing.T) {
		wantRejected(t, serve(t, h, bearer(c.leaf)), http.StatusUnauthorized, "chain_incomplete")
	})
	t.Run("unrelated ancestors only", func(t *testing.T) {
		wantRejected(t, serve(t, h, withChain(bearer(c.leaf), c.jwt(t, nil))), http.StatusUnauthorized, "chain_incomplete")
	})
	t.Run("forged parent", func(t *testing.T) {
		wantRejected(t, serve(t, h, withChain(bearer(c.leaf), tamperJWS(c.root))), http.StatusUnauthorized, "bad_signature")
	})
	t.Run("parent not trusted", func(t *testing.T) {
		other := provision(t, Config{TrustedIssuers: []string{newParty(t).did}})
		wantRejected(t, serve(t, other, withChain(bearer(c.leaf), c.root)), http.StatusUnauthorized, "untrusted_issuer")
	})
	t.Run("chain header alone is no credential", func(t *testing.T) {
		res := serve(t, h, withChain(newRequest(http.MethodPost, "/mcp", toolsCallBody), c.root))
		wantRejected(t, res, http.StatusUnauthorized, "invalid_token")
		if b := decodeErr(t, res.rec); b.ErrorDescription != carrier.ErrNoCredential.Error() {
			t.Errorf("body %+v", b)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		for _, v := range []string{`[`, `["a", 1]`, `[null]`, `[""]`, `{"a":`} {
			res := serve(t, h, withChain(bearer(c.leaf), v))
			wantRejected(t, res, http.StatusBadRequest, "invalid_request")
			if b := decodeErr(t, res.rec); b.ErrorDescription != carrier.ErrChainMalformed.Error() {
				t.Errorf("%s: body %+v", v, b)
			}
		}
	})
	t.Run("too many", func(t *testing.T) {
		vals := make([]string, carrier.MaxAncestors+1)
		for i := range vals {
			vals[i] = c.root
		}
		res := serve(t, h, withChain(bearer(c.leaf), strings.Join(vals, ",")))
		wantRejected(t, res, http.StatusBadRequest, "invalid_request")
		if b := decodeErr(t, res.rec); b.ErrorDescription != carrier.ErrChainTooLarge.Error() {
			t.Errorf("body %+v", b)
		}
		wantAdmitted(t, serve(t, h, withChain(bearer(c.leaf), strings.Join(vals[1:], ","))))
	})
	t.Run("too large", func(t *testing.T) {
		small := c.handler(t, func(c *setup) { c.MaxCredentialSize = 2048 })
		big := strings.Repeat("x", carrier.MaxAncestors*2048+1)
		res := serve(t, small, withChain(bearer(c.leaf), big))
		wantRejected(t, res, http.StatusBadRequest, "invalid_request")
		if b := decodeErr(t, res.rec); b.ErrorDescription != carrier.ErrChainTooLarge.Error() {
			t.Errorf("body %+v", b)
		}
	})
	t.Run("not forwarded on an anonymous admission", func(t *testing.T) {
		anon := c.handler(t, func(c *setup) {
			c.Tools = []ToolPolicy{{Name: "echo", AllowAnonymous: true}}
		})
		res := serve(t, anon, withChain(newRequest(http.MethodPost, "/mcp", toolsCallBody), c.root))
		wantAdmitted(t, res)
		if res.fwd.Header.Get("Kya-Os-Delegation-Chain") != "" {
			t.Error("chain header forwarded")
		}
	})
	t.Run("carrier off", func(t *testing.T) {
		off := c.handler(t, func(c *setup) { c.Carriers = []string{"authorization"} })
		wantRejected(t, serve(t, off, withChain(bearer(c.leaf), c.root)), http.StatusUnauthorized, "chain_incomplete")
		res := serve(t, off, withChain(bearer(c.jwt(t, nil)), c.root))
		wantAdmitted(t, res)
		if res.fwd.Header.Get("Kya-Os-Delegation-Chain") != "" {
			t.Error("a KYA-* header that is no carrier was forwarded")
		}
	})
	t.Run("passthrough", func(t *testing.T) {
		pt := c.handler(t, func(c *setup) { c.PassthroughCredential = true })
		res := serve(t, pt, withChain(bearer(c.leaf), c.root))
		wantAdmitted(t, res)
		if res.fwd.Header.Get("Kya-Os-Delegation-Chain") != c.root {
			t.Error("chain header not passed through")
		}
	})
}

// statusServer serves one status list credential over TLS.
type statusServer struct {
	*httptest.Server
	mu   sync.Mutex
	body []byte
	code int // when not 0, every request gets it
	hits int
}

func newStatusServer(t testing.TB) *statusServer {
	s := &statusServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.hits++
		if s.code != 0 {
			w.WriteHeader(s.code)
			return
		}
		w.Header().Set("Content-Type", "application/vc+jwt")
		_, _ = w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *statusServer) set(body []byte, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.code = body, code
}

func (s *statusServer) fetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

func (s *statusServer) listURL() string { return s.URL + "/status/1" }

// statusList is a StatusList2021Credential VC-JWT by iss for url with the
// bits set.
func statusList(t testing.TB, iss party, url string, set ...int) []byte {
	t.Helper()
	bits := make([]byte, 16384)
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
	now := time.Now()
	cred := map[string]any{
		"@context":     []any{"https://www.w3.org/2018/credentials/v1", "https://w3id.org/vc/status-list/2021/v1"},
		"id":           url,
		"type":         []any{"VerifiableCredential", "StatusList2021Credential"},
		"issuer":       iss.did,
		"issuanceDate": now.Add(-time.Hour).UTC().Format(time.RFC3339),
		"credentialSubject": map[string]any{
			"id":            url + "#list",
			"type":          "StatusList2021",
			"statusPurpose": "revocation",
			"encodedList":   base64.RawURLEncoding.EncodeToString(buf.Bytes()),
		},
	}
	return []byte(signJWT(t, iss, map[string]any{"iss": iss.did, "jti": url, "iat": now.Unix(), "vc": cred}))
}

// withStatus is a credential of f whose credentialStatus names bit index
// of the list at url.
func withStatus(t testing.TB, f fixture, url, index string) string {
	return issueAs(t, f.user, f.template(nil), func(_, cred map[string]any) {
		cred["credentialStatus"] = map[string]any{
			"id": url + "#" + index, "type": "StatusList2021Entry", "statusPurpose": "revocation",
			"statusListIndex": index, "statusListCredential": url,
		}
	})
}

func TestStatusList(t *testing.T) {
	f := newFixture(t)
	srv := newStatusServer(t)
	srv.set(statusList(t, f.user, srv.listURL(), 7), 0)
	ctx, reg := obsContext(t)
	h, _ := obsHandler(t, ctx, f, func(c *setup) {
		c.AllowPrivateDIDWeb = true
		c.statusClient = srv.Client()
	})
	good := withStatus(t, f, srv.listURL(), "6")
	revoked := withStatus(t, f, srv.listURL(), "7")

	t.Run("not revoked", func(t *testing.T) {
		wantAdmitted(t, serve(t, h, bearer(good)))
		if n := srv.fetches(); n != 1 {
			t.Errorf("status list fetched %d times", n)
		}
	})
	t.Run("revoked", func(t *testing.T) {
		wantRejected(t, serve(t, h, bearer(revoked)), http.StatusUnauthorized, "revoked")
	})
	t.Run("revoked, in a presentation", func(t *testing.T) {
		wantRejected(t, serve(t, h, bearer(vpOf(t, f.agent, "", nil, revoked))), http.StatusUnauthorized, "revoked")
	})
	t.Run("status server down", func(t *testing.T) {
		down := newStatusServer(t)
		down.set(nil, http.StatusInternalServerError)
		h, _ := obsHandler(t, ctx, f, func(c *setup) {
			c.AllowPrivateDIDWeb = true
			c.statusClient = down.Client()
		})
		res := serve(t, h, bearer(withStatus(t, f, down.listURL(), "6")))
		wantRejected(t, res, http.StatusServiceUnavailable, "status_unavailable")
		if got := observetest.Value(observetest.Gather(t, reg), "caddy_mcpi_status_list_errors_total", "reason", "status_unavailable"); got != 1 {
			t.Errorf("status list errors counted: %v", got)
		}
	})
	t.Run("list signed by someone else", func(t *testing.T) {
		forged := newStatusServer(t)
		forged.set(statusList(t, newParty(t), forged.listURL()), 0)
		h := f.handler(t, func(c *setup) {
			c.AllowPrivateDIDWeb = true
			c.statusClient = forged.Client()
		})
		wantRejected(t, serve(t, h, bearer(withStatus(t, f, forged.listURL(), "6"))), http.StatusUnauthorized, "bad_status_list")
	})
	t.Run("private address refused by default", func(t *testing.T) {
		h := f.handler(t, func(c *setup) { c.statusClient = srv.Client() })
		wantRejected(t, serve(t, h, bearer(good)), http.StatusServiceUnavailable, "status_unavailable")
	})
	t.Run("stale if error", func(t *testing.T) {
		flaky := newStatusServer(t)
		flaky.set(statusList(t, f.user, flaky.listURL()), 0)
		h := f.handler(t, func(c *setup) {
			c.AllowPrivateDIDWeb = true
			c.statusClient = flaky.Client()
			c.StatusListTTL = Duration(time.Millisecond)
			c.StatusStaleIfError = Duration(time.Hour)
		})
		cred := withStatus(t, f, flaky.listURL(), "6")
		wantAdmitted(t, serve(t, h, bearer(cred)))
		flaky.set(nil, http.StatusInternalServerError)
		time.Sleep(5 * time.Millisecond)
		wantAdmitted(t, serve(t, h, bearer(cred)))
		if n := flaky.fetches(); n < 2 {
			t.Errorf("list fetched %d times; the TTL was not honoured", n)
		}
	})
}
func TestJSONLDSetting(t *testing.T) {
	f := newFixture(t)
	// A credential with a Linked Data proof that does not verify: with
	// JSON-LD on it is checked (and fails), off it is not supported.
	var doc map[string]any
	if err := json.Unmarshal(f.jsonVC(t, nil), &doc); err != nil {
		t.Fatal(err)
	}
	doc["proof"] = map[string]any{
		"type": "Ed25519Signature2018", "created": time.Now().UTC().Format(time.RFC3339),
		"verificationMethod": f.user.kid, "proofPurpose": "assertionMethod",
		"jws": "eyJhbGciOiJFZERTQSIsImI2NCI6ZmFsc2UsImNyaXQiOlsiYjY0Il19..AAAA",
	}
	ldCred, _ := json.Marshal(doc)
	body := bodyWith(t, "_mcpi_delegation", json.RawMessage(ldCred), true)

	off := f.handler(t, func(c *setup) { c.DisableJSONLD = true })
	wantRejected(t, serve(t, off, newRequest(http.MethodPost, "/mcp", body)), http.StatusUnauthorized, "unsupported_format")

	on := f.handler(t, nil)
	res := serve(t, on, newRequest(http.MethodPost, "/mcp", body))
	if res.called || res.rec.Code != http.StatusUnauthorized {
		t.Fatalf("%d %s", res.rec.Code, res.rec.Body)
	}
	if b := decodeErr(t, res.rec); b.Reason == "unsupported_format" || b.Reason == "" {
		t.Errorf("JSON-LD on, yet %+v", b)
	} else {
		t.Logf("JSON-LD on: %+v", b)
	}

	t.Run("context files", func(t *testing.T) {
		dir := t.TempDir()
		good := filepath.Join(dir, "ctx.jsonld")
		if err := os.WriteFile(good, []byte(`{"@context":{"ex":"https://example.com/ns#"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		f.handler(t, func(c *setup) { c.JSONLDContexts = map[string]string{"https://example.com/ctx/v1": good} })

		_, err := New(Config{TrustedIssuers: []string{f.user.did}, DelegationConfig: DelegationConfig{
			JSONLDContexts: map[string]string{"https://example.com/ctx/v1": filepath.Join(dir, "missing")},
		}})
		if err == nil || !strings.Contains(err.Error(), "JSON-LD") {
			t.Fatalf("Provision with a missing context file: %v", err)
		}
	})
}

// TestPresentationSingleUseEveryLevel: with require_presentation at level
// 1 and 2, the same presentation is admitted once; the second use is
// refused as a replay, through the route's store. A presentation is the
// proof that the caller holds the agent's key now, so single use matters at
// every level, not only at level 3 where the handshake also checks it.
func TestPresentationSingleUseEveryLevel(t *testing.T) {
	f := newFixture(t)
	cred := f.jwt(t, nil)
	for _, level := range []int{1, 2} {
		t.Run(fmt.Sprintf("level %d", level), func(t *testing.T) {
			h := f.handler(t, func(c *setup) { c.Level, c.RequirePresentation = level, true })
			vp := vpOf(t, f.agent, "", nil, cred)
			wantAdmitted(t, serve(t, h, bearer(vp)))
			wantRejected(t, serve(t, h, bearer(vp)), http.StatusUnauthorized, "replayed")
			// A fresh presentation of the same credential is another one.
			wantAdmitted(t, serve(t, h, bearer(vpOf(t, f.agent, "", nil, cred))))
		})
	}
}
