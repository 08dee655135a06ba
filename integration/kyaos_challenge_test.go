package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

const kyaosConsent = "https://consent.example.test/approve"

// kyaosChallengeConfig signs results, requires proofs, and gives the
// transfer tool a scope the default credential lacks.
const kyaosChallengeConfig = "level 2\nrequest_proof required\nresponse_proof sign\nconsent_url " + kyaosConsent +
	"\ntool transfer {\n\tscopes payments:write\n}"

// getJSON fetches path from the edge, without a credential.
func getJSON(t *testing.T, h *harness, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(h.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// resumeCall is kyaosCall with another id, carrying token in params._meta.
func resumeCall(id, token string) string {
	body := strings.Replace(kyaosCall, `"id":1`, `"id":`+id, 1)
	return strings.Replace(body, `"params":{`, `"params":{"_meta":{"org.kya-os/resume-token":"`+token+`"},`, 1)
}

// TestKYAOSSignedChallenge: through the real Caddy, a call missing a scope
// gets the signed needs_authorization result (nothing upstream); its proof
// verifies against the edge's did.json and binds the request and the
// consent URL; the retry with the resumeToken, a credential holding the
// scope and a fresh proof is admitted once, and the token replayed is
// refused with nothing upstream.
func TestKYAOSSignedChallenge(t *testing.T) {
	h := startL3Edge(t, kyaosChallengeConfig, jsonRPCUpstream(), sharedStorage(t))
	w := newWorld(t, h)
	ctx := testContext(t)
	aud := h.hostAudience()

	call := proveAs(t, w.agent, aud, time.Now(), kyaosCall)
	resp := sendRaw(ctx, t, h, w.jwt(t), call)
	if resp.Status != 200 || len(h.upstream.Requests()) != 0 {
		t.Fatalf("challenge: %d %s (%d upstream)", resp.Status, resp.Body, len(h.upstream.Requests()))
	}
	var out struct{ Result json.RawMessage }
	var result struct {
		ResultType string
		Content    json.RawMessage
	}
	var items []struct{ Text string }
	var c struct {
		Error            string
		AuthorizationURL string
		ResumeToken      string
		Scopes           []string
	}
	if json.Unmarshal(resp.Body, &out) != nil || json.Unmarshal(out.Result, &result) != nil ||
		json.Unmarshal(result.Content, &items) != nil || len(items) != 1 || json.Unmarshal([]byte(items[0].Text), &c) != nil ||
		result.ResultType != "complete" || c.Error != "needs_authorization" || !strings.HasPrefix(c.AuthorizationURL, kyaosConsent+"?") ||
		c.ResumeToken == "" || len(c.Scopes) != 1 || c.Scopes[0] != "payments:write" {
		t.Fatalf("not the signed challenge: %s", resp.Body)
	}

	status, docBody := getJSON(t, h, "/.well-known/did.json")
	doc, err := didresolver.ParseDocument(docBody)
	if status != 200 || err != nil {
		t.Fatalf("did.json: %d %v", status, err)
	}
	check := kyaos.ResponseCheck{Resolver: fixedDoc{doc}, ExpectedSigner: aud, ExpectedAudiences: []string{w.agent.did},
		Request: []byte(call), Response: out.Result}
	p, err := kyaos.VerifyResponse(ctx, kyaos.FindResponseProof(out.Result), check)
	if err != nil || p.Meta.Outcome != kyaos.OutcomeNeedsAuthorization {
		t.Fatalf("challenge proof: %v\n%s", err, out.Result)
	}
	check.Response = []byte(strings.Replace(string(out.Result), "consent.example.test", "consent.evil.test", 1))
	if _, err := kyaos.VerifyResponse(ctx, kyaos.FindResponseProof(out.Result), check); err == nil {
		t.Fatal("a swapped consent URL verified")
	}

	granted := w.jwt(t, func(tm *vc.Template) { tm.Scopes = append(tm.Scopes, "payments:write") })
	retry := proveAs(t, w.agent, aud, time.Now(), resumeCall("2", c.ResumeToken))
	if resp = sendRaw(ctx, t, h, granted, retry); resp.Status != 200 || resp.rpcError(t, 2) != 0 {
		t.Fatalf("retry: %d %s", resp.Status, resp.Body)
	}
	if reqs := h.upstream.Requests(); len(reqs) != 1 || string(reqs[0].Body) != retry {
		t.Fatalf("upstream got %d requests", len(reqs))
	}

	h.upstream.Reset()
	again := proveAs(t, w.agent, aud, time.Now(), resumeCall("3", c.ResumeToken))
	resp = sendRaw(ctx, t, h, granted, again)
	var refused struct {
		Error struct {
			Code int
			Data struct{ Reason string }
		}
	}
	if json.Unmarshal(resp.Body, &refused) != nil || resp.Status != 403 || refused.Error.Code != -31000 ||
		refused.Error.Data.Reason != "resume_token_replayed" || len(h.upstream.Requests()) != 0 {
		t.Fatalf("replayed token: %d %s", resp.Status, resp.Body)
	}
}

// TestKYAOSWellKnownMCP: the route that enforces the extension serves
// /.well-known/mcp without a credential: its DID and the extension.
func TestKYAOSWellKnownMCP(t *testing.T) {
	h := startL3Edge(t, kyaosChallengeConfig, jsonRPCUpstream(), sharedStorage(t))
	status, body := getJSON(t, h, "/.well-known/mcp")
	var doc struct {
		DID        string
		Extensions map[string]struct{ Required bool }
	}
	if err := json.Unmarshal(body, &doc); err != nil || status != 200 || doc.DID != h.hostAudience() ||
		len(h.upstream.Requests()) != 0 {
		t.Fatalf("%d %s", status, body)
	}
	if _, ok := doc.Extensions["org.kya-os/decentralized-authority"]; !ok {
		t.Fatalf("no extension: %s", body)
	}
}

// TestKYAOSResumeTokenAcrossReplicas: two Caddy instances sharing a real
// Redis nonce store: a resumeToken one issued is redeemed at the other,
// and then refused as replayed by the first.
func TestKYAOSResumeTokenAcrossReplicas(t *testing.T) {
	redis := redistest.Start(t)
	storage := sharedStorage(t)
	extra := kyaosChallengeConfig + "\nedge_did did:web:mcp.example.test\nnonce_store redis " + redis.URL()
	a := startL3Edge(t, extra, jsonRPCUpstream(), storage)
	b := startL3Edge(t, extra, jsonRPCUpstream(), storage)
	w := newWorld(t, a)
	auds := func(tm *vc.Template) { tm.Audience = []string{a.hostAudience(), b.hostAudience()} }
	ctx := testContext(t)
	const aud = "did:web:mcp.example.test"

	resp := sendRaw(ctx, t, a, w.jwt(t, auds), proveAs(t, w.agent, aud, time.Now(), kyaosCall))
	var out struct {
		Result struct{ Content []struct{ Text string } }
	}
	var c struct{ ResumeToken string }
	if json.Unmarshal(resp.Body, &out) != nil || len(out.Result.Content) != 1 ||
		json.Unmarshal([]byte(out.Result.Content[0].Text), &c) != nil || c.ResumeToken == "" {
		t.Fatalf("challenge: %d %s", resp.Status, resp.Body)
	}
	granted := w.jwt(t, auds, func(tm *vc.Template) { tm.Scopes = append(tm.Scopes, "payments:write") })
	if resp = sendRaw(ctx, t, b, granted, proveAs(t, w.agent, aud, time.Now(), resumeCall("2", c.ResumeToken))); resp.Status != 200 || len(b.upstream.Requests()) != 1 {
		t.Fatalf("retry at the other replica: %d %s", resp.Status, resp.Body)
	}
	resp = sendRaw(ctx, t, a, granted, proveAs(t, w.agent, aud, time.Now(), resumeCall("3", c.ResumeToken)))
	if resp.Status != 403 || !strings.Contains(string(resp.Body), `"reason":"resume_token_replayed"`) || len(a.upstream.Requests()) != 0 {
		t.Fatalf("replayed at the first replica: %d %s", resp.Status, resp.Body)
	}
}
