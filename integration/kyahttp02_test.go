package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// kyaAgent is a small draft-kya-http-02 agent: it calls a tool over plain
// HTTP with its delegation, reads the challenge, polls the pickup endpoint
// with its own random token, and retries with what it picked up.
type kyaAgent struct {
	t    *testing.T
	ctx  context.Context
	base string
}

type kyaChallenge struct {
	Error string `json:"error"`
	KYAOS struct {
		SID            string   `json:"sid"`
		ConsentURI     string   `json:"consent_uri"`
		PickupURI      string   `json:"pickup_uri"`
		RequiredScopes []string `json:"required_scopes"`
		PollIntervalS  int      `json:"poll_interval_s"`
		ChallengeProof string   `json:"challenge_proof"`
	} `json:"kyaos"`
	Instructions string `json:"instructions"`
}

const kyaWhoamiCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`

// call POSTs the whoami tools/call with hdr.
func (a *kyaAgent) call(hdr http.Header) (*http.Response, []byte) {
	a.t.Helper()
	req, _ := http.NewRequestWithContext(a.ctx, http.MethodPost, a.base+mcpserver.Path, strings.NewReader(kyaWhoamiCall))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", legacyProtocol)
	for k, v := range hdr {
		req.Header[k] = v
	}
	return a.send(req)
}

func (a *kyaAgent) send(req *http.Request) (*http.Response, []byte) {
	a.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// poll GETs the pickup URI with token ("" sends none).
func (a *kyaAgent) poll(uri, token string) (*http.Response, map[string]any) {
	a.t.Helper()
	req, _ := http.NewRequestWithContext(a.ctx, http.MethodGet, uri, nil)
	if token != "" {
		req.Header.Set("X-KYA-Pickup-Token", token)
	}
	resp, body := a.send(req)
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		a.t.Errorf("pickup answer %d has Cache-Control %q, want no-store", resp.StatusCode, got)
	}
	var m map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &m); err != nil {
			a.t.Fatalf("pickup answer %d is not JSON: %s", resp.StatusCode, body)
		}
	}
	return resp, m
}

func pickupToken(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// delegationParams reads the Delegation challenge's parameters in order.
var delegationParam = regexp.MustCompile(`([a-z_]+)="((?:[^"\\]|\\.)*)"`)

func delegationParams(t *testing.T, h string) (names []string, values map[string]string) {
	t.Helper()
	rest, ok := strings.CutPrefix(h, "Delegation ")
	if !ok {
		t.Fatalf("first WWW-Authenticate %q is not a Delegation challenge", h)
	}
	values = map[string]string{}
	for _, m := range delegationParam.FindAllStringSubmatch(rest, -1) {
		names = append(names, m[1])
		values[m[1]] = m[2]
	}
	return names, values
}

// TestKYAHTTP02Sequence: the whole draft-kya-http-02 sequence through a
// real Caddy, from a small agent of the test's own: the challenge (401 to
// a kya-labelled Signature-Input, the 200 envelope to KYA-Accept-Challenge,
// the MCP prompt to neither), its challenge_proof checked against the
// edge's did.json, consent in Chromium, polls pending → ready, another
// holder refused, too-fast polls slowed, the retry with the picked-up
// delegation reaching the upstream once, and the session's expiry.
func TestKYAHTTP02Sequence(t *testing.T) {
	fd := newKYAFrontDoor(t, "25s")
	b := newBrowser(t)
	b.signIn(frontDoorUser, frontDoorPassword)
	ctx := frontDoorContext(t)
	a := &kyaAgent{t: t, ctx: ctx, base: fd.base}
	own := fd.greetOnly(t)

	// Neither opt-in: the MCP prompt, as before.
	resp, body := a.call(http.Header{"KYA-Delegation": {own}})
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"needs_authorization"`)) || resp.Header.Get("WWW-Authenticate") != "" {
		t.Fatalf("no opt-in: want the MCP prompt (200, needs_authorization), got %d %v\n%s", resp.StatusCode, resp.Header, body)
	}

	// The fetcher envelope.
	resp, body = a.call(http.Header{"KYA-Delegation": {own}, "Kya-Accept-Challenge": {"1"}})
	var env kyaChallenge
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &env) != nil || env.Error != "kyaos/authorization-required" {
		t.Fatalf("KYA-Accept-Challenge: want the 200 envelope, got %d\n%s", resp.StatusCode, body)
	}
	if resp.Header.Get("WWW-Authenticate") != "" || resp.Header.Get("Retry-After") != "" {
		t.Errorf("the envelope carries WWW-Authenticate or Retry-After: %v", resp.Header)
	}
	for k, want := range map[string]string{
		"KYA-Auth-Required": "true", "KYA-Auth-Url": env.KYAOS.ConsentURI,
		"Link": "<" + env.KYAOS.ConsentURI + `>; rel="kya-authorize"`, "KYA-Action": "challenge", "Cache-Control": "no-store",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("envelope %s = %q, want %q", k, got, want)
		}
	}

	// The 401 challenge.
	sigInput := `kya=("@method" "@authority" "@target-uri");created=1700000000;keyid="` + fd.agent.kid + `";tag="kya-http/2"`
	resp, body = a.call(http.Header{"KYA-Delegation": {own}, "Signature-Input": {sigInput}})
	var ch kyaChallenge
	if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(body, &ch) != nil || ch.Error != "kyaos/authorization-required" {
		t.Fatalf("Signature-Input kya: want the 401 challenge, got %d\n%s", resp.StatusCode, body)
	}
	wa := resp.Header.Values("WWW-Authenticate")
	if len(wa) != 2 || !strings.HasPrefix(wa[1], `Bearer resource_metadata="`) {
		t.Fatalf("WWW-Authenticate = %q; want Delegation then Bearer resource_metadata", wa)
	}
	names, params := delegationParams(t, wa[0])
	if got := strings.Join(names, ","); got != "realm,sid,consent_uri,pickup_uri,scope,interval,kind" {
		t.Errorf("Delegation parameters in order %s", got)
	}
	k := ch.KYAOS
	if params["sid"] != k.SID || params["consent_uri"] != k.ConsentURI || params["pickup_uri"] != k.PickupURI ||
		params["scope"] != scopeWhoami || params["interval"] != "1" || params["kind"] != "delegation" {
		t.Errorf("Delegation parameters %v disagree with the body %+v", params, k)
	}
	if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("401 Retry-After %q, Cache-Control %q", resp.Header.Get("Retry-After"), resp.Header.Get("Cache-Control"))
	}
	if !regexp.MustCompile(`^kya-[0-9a-f]{16,64}$`).MatchString(k.SID) || !strings.HasPrefix(k.PickupURI, fd.base+"/") ||
		!strings.HasPrefix(k.ConsentURI, fd.base+"/oauth/authorize?") || len(k.RequiredScopes) != 1 || k.RequiredScopes[0] != scopeWhoami {
		t.Errorf("challenge body %+v", k)
	}
	if n := len(whoamiCalls(fd.upstream.Requests())); n != 0 {
		t.Fatalf("a challenged call reached the upstream %d times", n)
	}

	// challenge_proof, verified against the edge's did.json.
	kid := kyaos.ChallengeProofKID(k.ChallengeProof)
	did, key := edgeKey(ctx, t, fd.base, kid)
	if err := kyaos.VerifyChallengeProof(k.ChallengeProof, key, did, kid, k.SID, k.ConsentURI, k.RequiredScopes, time.Now(), 0); err != nil {
		t.Errorf("challenge_proof does not verify against the edge's did.json (%s, %s): %v", did, kid, err)
	}
	if err := kyaos.VerifyChallengeProof(k.ChallengeProof, key, did, kid, env.KYAOS.SID, k.ConsentURI, k.RequiredScopes, time.Now(), 0); err == nil {
		t.Error("challenge_proof verifies for another session id")
	}

	// Polls: no token, pending, another holder, too fast.
	if resp, m := a.poll(k.PickupURI, ""); resp.StatusCode != http.StatusUnauthorized || m["error"] != "kyaos/authorization-required" ||
		resp.Header.Get("WWW-Authenticate") != `Pickup-Token header="X-KYA-Pickup-Token"` {
		t.Errorf("poll without a token: %d %v %v", resp.StatusCode, m, resp.Header)
	}
	mine, theirs := pickupToken(t), pickupToken(t)
	resp, m := a.poll(k.PickupURI, mine)
	if resp.StatusCode != http.StatusAccepted || m["status"] != "pending" {
		t.Fatalf("first poll: want 202 pending, got %d %v", resp.StatusCode, m)
	}
	sessionEnds := time.Now().Add(time.Duration(m["expires_in"].(float64)) * time.Second)
	if resp, m := a.poll(k.PickupURI, theirs); resp.StatusCode != http.StatusForbidden || m["error"] != "kyaos/pickup-pinned" {
		t.Errorf("another holder's poll: want 403 kyaos/pickup-pinned, got %d %v", resp.StatusCode, m)
	}
	if resp, _ := a.poll(k.PickupURI, mine); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a poll at once after the last: want 429 with Retry-After, got %d %v", resp.StatusCode, resp.Header)
	}
	if resp, m := a.poll(fd.base+"/oauth/kya/pickup/kya-"+strings.Repeat("0", 64), mine); resp.StatusCode != http.StatusNotFound || m["error"] != "kyaos/invalid-session" {
		t.Errorf("an unknown session: want 404 kyaos/invalid-session, got %d %v", resp.StatusCode, m)
	}

	// The user approves.
	b.do("opening consent_uri", chromedp.Navigate(k.ConsentURI), chromedp.WaitVisible(chromedp.CSS(`button[name="approve"]`)))
	page := &consentPage{b: b}
	if text := page.text(); !strings.Contains(text, fd.agent.did) || !strings.Contains(text, scopeWhoami) {
		t.Errorf("the consent page does not show the agent and the scope:\n%s", text)
	}
	page.approve()
	b.do("waiting for the approval", chromedp.WaitVisible(chromedp.CSS(`#agent-consent-done`)))

	time.Sleep(1100 * time.Millisecond)
	resp, m = a.poll(k.PickupURI, mine)
	if resp.StatusCode != http.StatusOK || m["status"] != "ready" || m["token_type"] != "Bearer" {
		t.Fatalf("poll after approval: want 200 ready, got %d %v", resp.StatusCode, m)
	}
	delegation, _ := m["delegation"].(string)
	if resp, m := a.poll(k.PickupURI, theirs); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another holder after approval: want 403, got %d %v", resp.StatusCode, m)
	}
	time.Sleep(1100 * time.Millisecond)
	// Handed out once: whoever holds the pickup token (an access log's
	// reader, say) cannot collect it again.
	if resp, m := a.poll(k.PickupURI, mine); resp.StatusCode != http.StatusGone || m["error"] != "kyaos/pickup-expired" || m["delegation"] != nil {
		t.Errorf("the pinned holder's second pickup: want 410 kyaos/pickup-expired without the delegation, got %d %v", resp.StatusCode, m)
	}

	// The retry with the delegation picked up.
	resp, body = a.call(http.Header{"Authorization": {"Bearer " + delegation}})
	if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"isError":true`)) {
		t.Fatalf("retry with the picked-up delegation: %d\n%s", resp.StatusCode, body)
	}
	calls := whoamiCalls(fd.upstream.Requests())
	if len(calls) != 1 {
		t.Fatalf("the upstream got whoami %d times, want once", len(calls))
	}
	if got := calls[0].Header.Get("X-Agent-DID"); got != fd.agent.did {
		t.Errorf("X-Agent-DID upstream = %q, want %q", got, fd.agent.did)
	}

	// The session ends.
	time.Sleep(time.Until(sessionEnds) + 1100*time.Millisecond)
	if resp, m := a.poll(k.PickupURI, mine); resp.StatusCode != http.StatusGone || m["error"] != "kyaos/pickup-expired" {
		t.Errorf("poll after the session ended: want 410 kyaos/pickup-expired, got %d %v", resp.StatusCode, m)
	}
}
