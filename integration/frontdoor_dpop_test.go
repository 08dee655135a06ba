package integration

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
)

// TestFrontDoorDPoPThroughCaddy: a DPoP-capable Go client of our own gets
// a credential bound to its key through a real Caddy, and calls tools with
// a proof per request; the upstream sees the did:jwk of that key as the
// agent, and the credential alone, as a bearer, is refused.
func TestFrontDoorDPoPThroughCaddy(t *testing.T) {
	h := startFrontDoor(t)
	ctx := testContext(t)
	_, key, _ := ed25519.GenerateKey(nil)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, u string, body string, hdr http.Header) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
		for k, v := range hdr {
			req.Header[k] = v
		}
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	basic := func(hdr http.Header) http.Header {
		hdr = hdr.Clone()
		if hdr == nil {
			hdr = http.Header{}
		}
		hdr.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("alice:secret")))
		return hdr
	}

	redirect := "http://127.0.0.1:33420/cb"
	_, body := send(http.MethodPost, h.base+"/oauth/register", `{"redirect_uris":["`+redirect+`"],"client_name":"dpop client"}`, nil)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	_ = json.Unmarshal([]byte(body), &reg)
	verifier := strings.Repeat("k", 50)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {redirect},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"resource": {h.base + "/mcp"}, "scope": {"echo:execute"}}
	res, page := send(http.MethodGet, h.base+"/oauth/authorize?"+q.Encode(), "", basic(nil))
	if res.StatusCode != 200 {
		t.Fatalf("consent page: %d %s", res.StatusCode, page)
	}
	answer := url.Values{"scope": {"echo:execute"}, "approve": {"1"}}
	for _, m := range consentHidden.FindAllStringSubmatch(page, -1) {
		answer.Set(m[1], html.UnescapeString(m[2]))
	}
	res, _ = send(http.MethodPost, h.base+"/oauth/authorize", answer.Encode(), basic(form))
	loc, _ := url.Parse(res.Header.Get("Location"))

	tokenProof, _ := dpop.NewProof(key, http.MethodPost, h.base+"/oauth/token", "", time.Now())
	hdr := form.Clone()
	hdr.Set("DPoP", tokenProof)
	res, body = send(http.MethodPost, h.base+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
		"client_id": {reg.ClientID}, "redirect_uri": {redirect}, "code_verifier": {verifier}}.Encode(), hdr)
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if json.Unmarshal([]byte(body), &tok) != nil || res.StatusCode != 200 || tok.TokenType != "DPoP" {
		t.Fatalf("token: %d %s", res.StatusCode, body)
	}

	call := func(scheme string, withProof bool) int {
		hdr := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Authorization": {scheme + " " + tok.AccessToken}}
		if withProof {
			p, _ := dpop.NewProof(key, http.MethodPost, h.base+"/mcp", tok.AccessToken, time.Now())
			hdr.Set("DPoP", p)
		}
		res, _ := send(http.MethodPost, h.base+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, hdr)
		return res.StatusCode
	}
	h.upstream.Reset()
	if s := call("DPoP", true); s != 200 {
		t.Fatalf("bound credential with a proof: %d", s)
	}
	if s := call("Bearer", false); s != 401 {
		t.Fatalf("bound credential as a bearer: %d", s)
	}
	reqs := h.upstream.Requests()
	want, _ := didresolver.JWKDID(key.Public())
	if len(reqs) != 1 || reqs[0].Header.Get("X-Agent-DID") != want || reqs[0].Header.Get("DPoP") != "" {
		t.Fatalf("upstream saw %d requests, agent %q, DPoP %q", len(reqs), reqs[0].Header.Get("X-Agent-DID"), reqs[0].Header.Get("DPoP"))
	}
}
