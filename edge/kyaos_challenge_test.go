package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge/proof"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/mcpi-edge/caddy-mcpi/vc/kyaos"
)

// challengeBody is the NeedsAuthorizationError a signed challenge carries
// in its content.
type challengeBody struct {
	Error            string   `json:"error"`
	AuthorizationURL string   `json:"authorizationUrl"`
	ResumeToken      string   `json:"resumeToken"`
	ExpiresAt        int64    `json:"expiresAt"`
	Scopes           []string `json:"scopes"`
}

// challengeOf reads the signed challenge a client got: the result, its
// content array and the error object inside.
func challengeOf(t *testing.T, raw []byte) (result, content json.RawMessage, c challengeBody) {
	t.Helper()
	var resp struct{ Result json.RawMessage }
	if err := json.Unmarshal(raw, &resp); err != nil || resp.Result == nil {
		t.Fatalf("not a result: %s", raw)
	}
	var r struct {
		ResultType string          `json:"resultType"`
		IsError    bool            `json:"isError"`
		Content    json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(resp.Result, &r)
	var items []struct{ Text string }
	if r.ResultType != "complete" || r.IsError || json.Unmarshal(r.Content, &items) != nil || len(items) != 1 ||
		json.Unmarshal([]byte(items[0].Text), &c) != nil {
		t.Fatalf("not a signed challenge: %s", resp.Result)
	}
	return resp.Result, r.Content, c
}

// withResume puts token in params._meta of a tools/call body.
func withResume(body, token string) string {
	q, _ := json.Marshal(token)
	return strings.Replace(body, `"params":{`, `"params":{"_meta":{"`+proof.ResumeTokenKey+`":`+string(q)+`},`, 1)
}

// TestSignedConsentChallenge: with response_proof sign, a call missing a
// scope is answered with the signed needs_authorization result; its proof
// verifies against the edge's did.json and binds the consent URL (a swapped
// URL fails); the retry with the resumeToken and a credential holding the
// scope is admitted once, and the token is refused replayed, forged or for
// another tool, with nothing forwarded.
func TestSignedConsentChallenge(t *testing.T) {
	f := newFixture(t)
	for _, mode := range []string{"sign", "sign envelope"} {
		t.Run(mode, func(t *testing.T) {
			h := polHandler(t, f, func(c *setup) { c.Level = 2; c.ResponseProof = mode })
			call := signed(t, f.agent, testAudience, polCall(7, "files_write"))
			res := polServe(t, h, polPost(call, f.jwt(t, nil)), nil)
			if res.called || res.rec.Code != http.StatusOK {
				t.Fatalf("forwarded %v, status %d: %s", res.called, res.rec.Code, res.rec.Body)
			}
			result, _, c := challengeOf(t, res.rec.Body.Bytes())
			if c.Error != "needs_authorization" || !strings.HasPrefix(c.AuthorizationURL, polConsent) ||
				!strings.Contains(c.AuthorizationURL, "tool=files_write") || !proof.IsEdgeResume(c.ResumeToken) ||
				!strings.Contains(c.AuthorizationURL, "resume_token="+c.ResumeToken) || c.ExpiresAt == 0 ||
				len(c.Scopes) != 1 || c.Scopes[0] != "files:write" {
				t.Fatalf("challenge %+v", c)
			}

			doc := serve(t, h, newRequest(http.MethodGet, "/.well-known/did.json", ""))
			d, err := didresolver.ParseDocument(doc.rec.Body.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			// resultType besides content: the envelope profile in both modes.
			data := result
			check := kyaos.ResponseCheck{Resolver: staticDoc{d}, ExpectedSigner: testAudience,
				ExpectedAudiences: []string{f.agent.did}, Request: []byte(call), Response: data}
			p, err := kyaos.VerifyResponse(context.Background(), kyaos.FindResponseProof(result), check)
			if err != nil || p.Meta.Outcome != kyaos.OutcomeNeedsAuthorization || p.Meta.ResponseHash == "" || p.Meta.Prf != kyaos.ProfileEnvelope {
				t.Fatalf("%v: %+v", err, p)
			}
			// A consent URL swapped on the way no longer matches the proof.
			swapped := strings.Replace(string(data), "consent.example.com", "evil.example.com", 1)
			check.Response = []byte(swapped)
			if _, err := kyaos.VerifyResponse(context.Background(), kyaos.FindResponseProof(result), check); err == nil {
				t.Fatal("a swapped consent URL verified")
			}

			granted := f.jwt(t, func(tm *vc.Template) { tm.Scopes = append(tm.Scopes, "files:read", "files:write") })
			retry := func(tool, token string, id int) polResult {
				return polServe(t, h, polPost(signed(t, f.agent, testAudience, withResume(polCall(id, tool), token)), granted), nil)
			}
			// Refused before the owner used it: another tool (the token stays).
			if r := retry("echo", c.ResumeToken, 8); r.called || r.rec.Code != http.StatusForbidden ||
				decodeProofRPC(t, r.rec).Error.Data.Reason != proof.ResumeForeign {
				t.Fatalf("foreign: %v %d %s", r.called, r.rec.Code, r.rec.Body)
			}
			if r := retry("files_write", c.ResumeToken, 9); !r.called || r.rec.Code != http.StatusOK {
				t.Fatalf("retry: %v %d %s", r.called, r.rec.Code, r.rec.Body)
			}
			for _, tc := range []struct{ token, reason string }{
				{c.ResumeToken, proof.ResumeReplayed},
				{proof.ResumePrefix + "00000000-0000-0000-0000-000000000000", proof.ResumeUnknown},
			} {
				r := retry("files_write", tc.token, 10)
				if r.called || r.rec.Code != http.StatusForbidden || decodeProofRPC(t, r.rec).Error.Data.Reason != tc.reason {
					t.Fatalf("%s: %v %d %s", tc.reason, r.called, r.rec.Code, r.rec.Body)
				}
			}
			// A token that is not the edge's is the upstream's business.
			if r := retry("files_write", "3f1c0a52-8d7e-4b1f-9a0c-2e4d6f8a1b3c", 11); !r.called {
				t.Fatalf("upstream token refused: %d %s", r.rec.Code, r.rec.Body)
			}
		})
	}
}

// TestConsentPromptUnsignedWithoutSigning: without response_proof sign the
// prompt of today stays (an isError tool result), with no edge proof.
func TestConsentPromptUnsignedWithoutSigning(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, nil)
	res := polServe(t, h, polPost(polCall(7, "files_write"), f.jwt(t, nil)), nil)
	var m rpcMsg
	if err := json.Unmarshal(res.rec.Body.Bytes(), &m); err != nil || res.called || m.Result == nil || !m.Result.IsError ||
		kyaos.FindResponseProof(jsonscan.Member(res.rec.Body.Bytes(), "result")) != nil {
		t.Fatalf("%v %s", err, res.rec.Body)
	}
}

// TestSignedDenial: with response_proof sign, the edge's refusal of a call
// it denies for another reason states it in its proof: outcome denied, the
// reason, no responseHash; it verifies against the edge's did.json.
func TestSignedDenial(t *testing.T) {
	f := newFixture(t)
	h := polHandler(t, f, func(c *setup) { c.Level = 2; c.ResponseProof = "sign" })
	call := polCall(4, "vp_only")
	res := polServe(t, h, polPost(call, f.jwt(t, nil)), nil)
	result := jsonscan.Member(res.rec.Body.Bytes(), "result")
	if res.called || result == nil {
		t.Fatalf("%v %s", res.called, res.rec.Body)
	}
	doc := serve(t, h, newRequest(http.MethodGet, "/.well-known/did.json", ""))
	d, err := didresolver.ParseDocument(doc.rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	p, err := kyaos.VerifyResponse(context.Background(), kyaos.FindResponseProof(result), kyaos.ResponseCheck{
		Resolver: staticDoc{d}, ExpectedSigner: testAudience, ExpectedAudiences: []string{f.agent.did}, Request: []byte(call)})
	if err != nil || p.Meta.Outcome != kyaos.OutcomeDenied || p.Meta.Reason != "presentation_required" || p.Meta.ResponseHash != "" {
		t.Fatalf("%v %+v", err, p)
	}
}

// resumeRefusingStore is a memory store that cannot take resume tokens,
// as a store that is down or full refuses them.
type resumeRefusingStore struct{ *challenge.MemoryStore }

func (s resumeRefusingStore) BindOwned(ctx context.Context, kind, owner, key string, value []byte, ttl time.Duration, max int) error {
	if kind == challenge.KindResume {
		return fmt.Errorf("%w: test store refuses resume tokens", challenge.ErrStoreUnavailable)
	}
	return s.MemoryStore.BindOwned(ctx, kind, owner, key, value, ttl, max)
}

// signingWithoutResume is a policy handler at level 2 with response_proof
// sign whose store refuses resume tokens, and the logs it writes.
func signingWithoutResume(t *testing.T, f fixture, mod func(*setup)) (*Handler, *observer.ObservedLogs) {
	mem := challenge.NewMemoryStore(context.Background())
	t.Cleanup(func() { _ = mem.Close() })
	core, logs := observer.New(zap.InfoLevel)
	h := polHandler(t, f, func(c *setup) {
		c.Level = 2
		c.ResponseProof = "sign"
		c.use(WithNonceStore(resumeRefusingStore{mem}, "test"), WithLogger(zap.New(core)))
		if mod != nil {
			mod(c)
		}
	})
	return h, logs
}

// TestResumeFailureWarnsOnce: when no resumeToken can be issued, each
// denied call still gets the unsigned consent prompt, and the warning
// that says so is written once however many callers meet it.
func TestResumeFailureWarnsOnce(t *testing.T) {
	f := newFixture(t)
	h, logs := signingWithoutResume(t, f, nil)
	for id := range 5 {
		res := polServe(t, h, polPost(signed(t, f.agent, testAudience, polCall(20+id, "files_write")), f.jwt(t, nil)), nil)
		var m rpcMsg
		if err := json.Unmarshal(res.rec.Body.Bytes(), &m); err != nil || res.called || m.Result == nil || !m.Result.IsError {
			t.Fatalf("call %d: %v forwarded %v: %s", id, err, res.called, res.rec.Body)
		}
	}
	if n := logs.FilterMessageSnippet("issuing a resumeToken failed").Len(); n != 1 {
		t.Fatalf("%d warnings for 5 calls without a resumeToken, want 1: %v", n, logs.All())
	}
}

// TestNoConsentNoResumeToken: with response_proof sign but no consent URL
// and no front door, a call denied for a missing scope is answered (a
// tool error, not forwarded) without the edge trying to issue a
// resumeToken: no record for a prompt that has nowhere to send the user.
func TestNoConsentNoResumeToken(t *testing.T) {
	f := newFixture(t)
	h, logs := signingWithoutResume(t, f, func(c *setup) { c.ConsentURL = "" })
	res := polServe(t, h, polPost(signed(t, f.agent, testAudience, polCall(30, "files_write")), f.jwt(t, nil)), nil)
	var m rpcMsg
	if err := json.Unmarshal(res.rec.Body.Bytes(), &m); err != nil || res.called || m.Result == nil || !m.Result.IsError {
		t.Fatalf("%v forwarded %v: %s", err, res.called, res.rec.Body)
	}
	if n := logs.FilterMessageSnippet("resumeToken").Len(); n != 0 {
		t.Fatalf("a resumeToken was asked for without a consent URL: %v", logs.All())
	}
}
