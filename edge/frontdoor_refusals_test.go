package edge_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
)

const redirect = "http://127.0.0.1:33418/callback"

// TestFrontDoorPKCERequired: an authorization request without PKCE, or
// with the plain method, goes back to the client as invalid_request and
// shows no consent page.
func TestFrontDoorPKCERequired(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	id := f.register(redirect)
	_, challenge := pkce()
	for name, mod := range map[string]func(url.Values){
		"missing":   func(v url.Values) { v.Del("code_challenge"); v.Del("code_challenge_method") },
		"plain":     func(v url.Values) { v.Set("code_challenge_method", "plain") },
		"no method": func(v url.Values) { v.Del("code_challenge_method") },
	} {
		t.Run(name, func(t *testing.T) {
			q := f.authzQuery(id, redirect, challenge, "")
			mod(q)
			res, _ := f.get("/oauth/authorize?"+q.Encode(), true)
			loc, _ := url.Parse(res.Header.Get("Location"))
			if res.StatusCode != http.StatusFound || loc.Query().Get("error") != "invalid_request" ||
				!strings.Contains(loc.Query().Get("error_description"), "S256") || loc.Query().Get("code") != "" {
				t.Fatalf("%d %s", res.StatusCode, loc)
			}
		})
	}
}

// TestFrontDoorCodeSingleUse: a code exchanged twice fails the second
// time; a wrong verifier, client or redirect fails and spends the code.
func TestFrontDoorCodeSingleUse(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	id := f.register(redirect)
	verifier, challenge := pkce()
	newCode := func() string {
		return f.approve(f.consentForm(f.authzQuery(id, redirect, challenge, "")), "echo:execute").Query().Get("code")
	}
	exchange := func(code string, mod func(url.Values)) (int, tokens) {
		v := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {id}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
		if mod != nil {
			mod(v)
		}
		return f.token(v, nil)
	}
	code := newCode()
	if s, tok := exchange(code, nil); s != 200 {
		t.Fatalf("first exchange: %d %+v", s, tok)
	}
	if s, tok := exchange(code, nil); s != 400 || tok.Error != "invalid_grant" || tok.AccessToken != "" {
		t.Fatalf("second exchange: %d %+v", s, tok)
	}
	other := f.register(redirect)
	for name, mod := range map[string]func(url.Values){
		"wrong verifier": func(v url.Values) { v.Set("code_verifier", strings.Repeat("x", 43)) },
		"no verifier":    func(v url.Values) { v.Del("code_verifier") },
		"other client":   func(v url.Values) { v.Set("client_id", other) },
		"other redirect": func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:1/cb") },
	} {
		code := newCode()
		if s, tok := exchange(code, mod); s != 400 || tok.Error != "invalid_grant" {
			t.Errorf("%s: %d %+v", name, s, tok)
		}
		if s, _ := exchange(code, nil); s != 400 {
			t.Errorf("%s: the code survived a failed exchange", name)
		}
	}
}

// TestFrontDoorRedirectURIs: a redirect URI that is not https or loopback
// http is refused at registration; at the authorization endpoint one the
// client did not register is shown to the user, never redirected to.
func TestFrontDoorRedirectURIs(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	for _, bad := range []string{"javascript:alert(1)", "data:text/html,hi", "http://evil.example/cb", "https://ok.example/cb#frag",
		"https://user@ok.example/cb", "ftp://ok.example/cb", "/relative", ""} {
		b, _ := json.Marshal(map[string]any{"redirect_uris": []string{bad}})
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/oauth/register", strings.NewReader(string(b)))
		res, body := f.do(req)
		if res.StatusCode != 400 || !strings.Contains(string(body), "redirect_uri") {
			t.Errorf("register %q: %d %s", bad, res.StatusCode, body)
		}
	}
	id := f.register(redirect, "https://app.example/cb")
	_, challenge := pkce()
	for _, bad := range []string{"javascript:alert(1)", "https://evil.example/cb", "http://127.0.0.1:33419/callback", redirect + "?x=1", "https://app.example/cb/"} {
		q := f.authzQuery(id, bad, challenge, "")
		res, body := f.get("/oauth/authorize?"+q.Encode(), true)
		if res.StatusCode != 400 || res.Header.Get("Location") != "" || !strings.Contains(string(body), "redirect_uri") {
			t.Errorf("authorize with %q: %d Location %q", bad, res.StatusCode, res.Header.Get("Location"))
		}
	}
	// A forged client_id (its MAC broken) is unknown.
	q := f.authzQuery(id[:len(id)-2]+"AA", redirect, challenge, "")
	if res, _ := f.get("/oauth/authorize?"+q.Encode(), true); res.StatusCode != 400 || res.Header.Get("Location") != "" {
		t.Errorf("forged client_id: %d", res.StatusCode)
	}
}

// TestFrontDoorConsentCSRF: a consent answer without the form's CSRF
// token, with another one, or for other parameters than the form showed,
// is refused and issues no code.
func TestFrontDoorConsentCSRF(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	id := f.register(redirect)
	_, challenge := pkce()
	form := f.consentForm(f.authzQuery(id, redirect, challenge, "echo:execute"))
	for name, mod := range map[string]func(url.Values){
		"missing":     func(v url.Values) { v.Del("csrf") },
		"forged":      func(v url.Values) { v.Set("csrf", "1700000000.AAAA") },
		"more scopes": func(v url.Values) { v.Set("requested_scope", "echo:execute files:read") },
		"other state": func(v url.Values) { v.Set("state", "attacker") },
		"expired":     func(v url.Values) { v.Set("csrf", "1000."+strings.SplitN(v.Get("csrf"), ".", 2)[1]) },
	} {
		v := cloneValues(form)
		mod(v)
		v["scope"] = []string{"echo:execute", "files:read"}
		v.Set("approve", "1")
		res, _ := f.postForm("/oauth/authorize", v, true, nil)
		if res.StatusCode != http.StatusForbidden || res.Header.Get("Location") != "" {
			t.Errorf("%s: %d %s", name, res.StatusCode, res.Header.Get("Location"))
		}
	}
	// Without a signed-in user: 401, for the page and the answer.
	if res, _ := f.get("/oauth/authorize?"+f.authzQuery(id, redirect, challenge, "").Encode(), false); res.StatusCode != 401 {
		t.Errorf("page without a user: %d", res.StatusCode)
	}
	v := cloneValues(form)
	v.Set("approve", "1")
	if res, _ := f.postForm("/oauth/authorize", v, false, nil); res.StatusCode != 401 {
		t.Errorf("answer without a user: %d", res.StatusCode)
	}
	// Deny: access_denied, no code.
	v = cloneValues(form)
	v.Set("deny", "1")
	res, _ := f.postForm("/oauth/authorize", v, true, nil)
	loc, _ := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != 302 || loc.Query().Get("error") != "access_denied" || loc.Query().Get("code") != "" {
		t.Errorf("deny: %d %s", res.StatusCode, loc)
	}
}

// TestFrontDoorCIMDPrivateAddress: a Client ID Metadata Document on a
// loopback or private address is never fetched.
func TestFrontDoorCIMDPrivateAddress(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	_, challenge := pkce()
	for _, id := range []string{"https://127.0.0.1/client.json", "https://10.0.0.1/client.json", "https://[::1]/c", "http://example.com/c"} {
		q := f.authzQuery(id, redirect, challenge, "")
		res, body := f.get("/oauth/authorize?"+q.Encode(), true)
		if res.StatusCode != 400 || res.Header.Get("Location") != "" {
			t.Errorf("%s: %d %s", id, res.StatusCode, body)
		}
	}
}

// TestFrontDoorUntickedScope: a scope the user unticked is not in the
// credential, and the tool it opens is refused; one never asked for is
// not granted even if the form sends it.
func TestFrontDoorUntickedScope(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	id := f.register(redirect)
	verifier, challenge := pkce()
	form := f.consentForm(f.authzQuery(id, redirect, challenge, "echo:execute"))
	loc := f.approve(form, "echo:execute", "files:read") // files:read was not asked for
	_, tok := f.token(url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "client_id": {id},
		"redirect_uri": {redirect}, "code_verifier": {verifier}}, nil)
	if tok.Scope != "echo:execute" {
		t.Fatalf("scope %q", tok.Scope)
	}
	_, tok = f.flow("files:read") // echo:execute unticked
	if tok.Scope != "files:read" {
		t.Fatalf("scope %q", tok.Scope)
	}
	before := f.upstreams
	res, body := f.call(tok.AccessToken, "Bearer", echoCall, nil)
	if f.upstreams != before || strings.Contains(string(body), `"text":"ok"`) {
		t.Fatalf("unticked echo reached the upstream: %d %s", res.StatusCode, body)
	}
	// RFC 6750 step-up: 403 insufficient_scope naming what to ask for.
	wa := res.Header.Get("WWW-Authenticate")
	if res.StatusCode != http.StatusForbidden || !strings.Contains(wa, `error="insufficient_scope"`) || !strings.Contains(wa, `scope="files:read echo:execute"`) {
		t.Fatalf("unticked echo: %d %q", res.StatusCode, wa)
	}
	if res, _ := f.call(tok.AccessToken, "Bearer", fileCall, nil); res.StatusCode != 200 || f.upstreams != before+1 {
		t.Fatalf("ticked files: %d", res.StatusCode)
	}
	// Stepping up through the same consent with the challenge's scopes.
	id2 := f.register(redirect)
	verifier2, challenge2 := pkce()
	loc2 := f.approve(f.consentForm(f.authzQuery(id2, redirect, challenge2, "files:read echo:execute")), "files:read", "echo:execute")
	_, tok = f.token(url.Values{"grant_type": {"authorization_code"}, "code": {loc2.Query().Get("code")}, "client_id": {id2},
		"redirect_uri": {redirect}, "code_verifier": {verifier2}}, nil)
	if res, _ := f.call(tok.AccessToken, "Bearer", echoCall, nil); res.StatusCode != 200 || f.upstreams != before+2 {
		t.Fatalf("echo after step-up: %d", res.StatusCode)
	}
}

// TestFrontDoorRefreshReuse: refresh tokens rotate; a spent one presented
// again revokes the whole family: the new refresh token and the
// credentials issued from it are refused.
func TestFrontDoorRefreshReuse(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	id, tok := f.flow("echo:execute")
	refresh := func(rt string) (int, tokens) {
		return f.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {id}}, nil)
	}
	s, tok2 := refresh(tok.RefreshToken)
	if s != 200 || tok2.RefreshToken == tok.RefreshToken || tok2.AccessToken == "" {
		t.Fatalf("refresh: %d %+v", s, tok2)
	}
	if res, _ := f.call(tok2.AccessToken, "Bearer", echoCall, nil); res.StatusCode != 200 {
		t.Fatalf("refreshed credential: %d", res.StatusCode)
	}
	if s, r := refresh(tok.RefreshToken); s != 400 || r.Error != "invalid_grant" {
		t.Fatalf("reuse: %d %+v", s, r)
	}
	if s, r := refresh(tok2.RefreshToken); s != 400 || r.Error != "invalid_grant" {
		t.Fatalf("the family's newer token after reuse: %d %+v", s, r)
	}
	for _, at := range []string{tok.AccessToken, tok2.AccessToken} {
		if res, body := f.call(at, "Bearer", echoCall, nil); res.StatusCode != 401 || !strings.Contains(string(body), "revoked") {
			t.Fatalf("credential of a revoked family: %d %s", res.StatusCode, body)
		}
	}
}

// TestFrontDoorRevocationAcrossReplicas: a credential revoked (RFC 7009)
// on one replica is refused by another sharing the Redis store and the
// key storage, within seconds.
func TestFrontDoorRevocationAcrossReplicas(t *testing.T) {
	a, b := replicaPair(t)
	_, tok := a.flow("echo:execute")
	// b knows a's client and user: its own secret and keys are a's.
	for _, at := range []string{tok.AccessToken} {
		if res, body := b.call(at, "Bearer", echoCall, nil); res.StatusCode != 200 {
			t.Fatalf("replica b before revocation: %d %s", res.StatusCode, body)
		}
	}
	res, _ := a.postForm("/oauth/revoke", url.Values{"token": {tok.AccessToken}}, false, nil)
	if res.StatusCode != 200 {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, body := b.call(tok.AccessToken, "Bearer", echoCall, nil)
		if res.StatusCode == 401 && strings.Contains(string(body), "revoked") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica b still admits the revoked credential: %d %s", res.StatusCode, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s, r := b.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {"x"}}, nil); s != 400 || r.Error != "invalid_grant" {
		t.Fatalf("refresh of a revoked family on b: %d %+v", s, r)
	}
}

// TestFrontDoorDPoP: a client that proves a key at the token endpoint
// gets a DPoP-bound credential (cnf.jkt, token_type DPoP) whose agent DID
// is the did:jwk of that key; a replayed proof or one for another URL is
// refused, and a refresh of a bound family needs a proof of the same key.
func TestFrontDoorDPoP(t *testing.T) {
	f := newFrontDoor(t, nil, nil)
	_, priv, _ := ed25519.GenerateKey(nil)
	id := f.register(redirect)
	verifier, challenge := pkce()
	tokenURL := f.srv.URL + "/oauth/token"
	exchange := func(proof string) (int, tokens) {
		code := f.approve(f.consentForm(f.authzQuery(id, redirect, challenge, "")), "echo:execute").Query().Get("code")
		return f.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {id},
			"redirect_uri": {redirect}, "code_verifier": {verifier}}, http.Header{"Dpop": {proof}})
	}
	proof, err := dpop.NewProof(priv, http.MethodPost, tokenURL, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, tok := exchange(proof)
	if s != 200 || tok.TokenType != "DPoP" {
		t.Fatalf("DPoP exchange: %d %+v", s, tok)
	}
	parts := strings.Split(tok.AccessToken, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Sub string `json:"sub"`
		Cnf struct {
			JKT string `json:"jkt"`
		} `json:"cnf"`
	}
	_ = json.Unmarshal(payload, &claims)
	wantDID, _ := didresolver.JWKDID(priv.Public())
	pk, _ := jwk.FromRaw(priv.Public())
	jkt, _ := dpop.Thumbprint(pk)
	if claims.Sub != wantDID || claims.Cnf.JKT != jkt {
		t.Fatalf("sub %s cnf.jkt %s; want %s %s", claims.Sub, claims.Cnf.JKT, wantDID, jkt)
	}
	if s, r := exchange(proof); s != 400 || r.Error != "invalid_dpop_proof" {
		t.Fatalf("replayed proof: %d %+v", s, r)
	}
	other, _ := dpop.NewProof(priv, http.MethodPost, f.srv.URL+"/elsewhere", "", time.Now())
	if s, r := exchange(other); s != 400 || r.Error != "invalid_dpop_proof" {
		t.Fatalf("proof for another htu: %d %+v", s, r)
	}
	old, _ := dpop.NewProof(priv, http.MethodPost, tokenURL, "", time.Now().Add(-10*time.Minute))
	if s, r := exchange(old); s != 400 || r.Error != "invalid_dpop_proof" {
		t.Fatalf("old proof: %d %+v", s, r)
	}
	// The bound credential is admitted with a proof by its key, and
	// refused as a bare bearer, without a proof, with a replayed one or
	// one for another URL (the resource side, edge/dpop).
	mcpURL := f.srv.URL + "/mcp"
	good, _ := dpop.NewProof(priv, http.MethodPost, mcpURL, tok.AccessToken, time.Now())
	before := f.upstreams
	if res, body := f.call(tok.AccessToken, "DPoP", echoCall, http.Header{"Dpop": {good}}); res.StatusCode != 200 || f.upstreams != before+1 {
		t.Fatalf("bound credential with its proof: %d %s", res.StatusCode, body)
	}
	if d := f.lastAdmitted(); d.AgentDID != wantDID {
		t.Fatalf("admitted agent %s, want %s", d.AgentDID, wantDID)
	}
	elsewhere, _ := dpop.NewProof(priv, http.MethodPost, f.srv.URL+"/other", tok.AccessToken, time.Now())
	stale, _ := dpop.NewProof(priv, http.MethodPost, mcpURL, tok.AccessToken, time.Now().Add(-10*time.Minute))
	for name, c := range map[string]struct {
		scheme string
		hdr    http.Header
	}{
		"bare bearer": {"Bearer", nil},
		"no proof":    {"DPoP", nil},
		"replayed":    {"DPoP", http.Header{"Dpop": {good}}},
		"other htu":   {"DPoP", http.Header{"Dpop": {elsewhere}}},
		"too old":     {"DPoP", http.Header{"Dpop": {stale}}},
		"another key's": {"DPoP", http.Header{"Dpop": {func() string {
			p, _ := dpop.NewProof(priv2(), http.MethodPost, mcpURL, tok.AccessToken, time.Now())
			return p
		}()}}},
	} {
		if res, _ := f.call(tok.AccessToken, c.scheme, echoCall, c.hdr); res.StatusCode != 401 {
			t.Errorf("%s: %d", name, res.StatusCode)
		}
	}
	if f.upstreams != before+1 {
		t.Fatalf("a refused bound request reached the upstream")
	}

	// Refresh of the bound family: without a proof, or with another key's.
	rt := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {id}}
	_, priv2, _ := ed25519.GenerateKey(nil)
	p2, _ := dpop.NewProof(priv2, http.MethodPost, tokenURL, "", time.Now())
	if s, r := f.token(rt, http.Header{"Dpop": {p2}}); s != 400 || r.Error != "invalid_dpop_proof" {
		t.Fatalf("refresh with another key: %d %+v", s, r)
	}
}

func priv2() ed25519.PrivateKey {
	_, k, _ := ed25519.GenerateKey(nil)
	return k
}
